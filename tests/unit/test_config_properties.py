"""kafkalite reads server.properties as java.util.Properties.load does (Kafka's
Utils.loadProps): every escape, continuation and comment form in one file, checked against
the expected pairs and, where a JVM is installed, against Java's own Properties.load of the
same bytes."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from kafkalite.config import ConfigError, load_config, read_properties

# Each line exercises one rule; the bytes are ISO-8859-1, as Properties.load(InputStream).
TEXT = (
    "# a comment\n"
    "! another comment \\\n"
    "not.a.continuation.of.the.comment=1\n"
    "   \t\f\n"
    "super.users=User:CN=a\\\\,b;User:CN=c\\,d\n"
    "colon.sep: x\n"
    "space.sep   y  \n"
    "both.sep = : z\n"
    "key\\=with\\:seps\\ and\\ spaces = v\n"
    "escapes=tab\\there\\nnl\\rcr\\ffeed\\q\n"
    "unicode=caf\\u00e9 \\ud83d\\ude00\n"
    "continued=first, \\\n"
    "      second, \\\r\n"
    "\t third\n"
    "even.backslashes=ends\\\\\\\\\n"
    "only.key\n"
    "empty.value=\n"
    "latin1=caf\xe9\r"
    "dup=1\n"
    "dup=2\n"
    "trailing=kept  \n"
    "eof.continuation=x\\"
)

EXPECTED = {
    "not.a.continuation.of.the.comment": "1",
    "super.users": "User:CN=a\\,b;User:CN=c,d",
    "colon.sep": "x",
    "space.sep": "y  ",
    "both.sep": ": z",
    "key=with:seps and spaces": "v",
    "escapes": "tab\there\nnl\rcr\ffeedq",
    "unicode": "caf\u00e9 \U0001F600",
    "continued": "first, second, third",
    "even.backslashes": "ends\\\\",
    "only.key": "",
    "empty.value": "",
    "latin1": "caf\u00e9",
    "dup": "2",
    "trailing": "kept  ",
    "eof.continuation": "x",
}

JAVA = """
import java.io.*; import java.util.*;
public class LoadProps { public static void main(String[] a) throws Exception {
  Properties p = new Properties();
  try (InputStream in = new FileInputStream(a[0])) { p.load(in); }
  StringBuilder sb = new StringBuilder("{");
  for (String k : new TreeSet<>(p.stringPropertyNames())) {
    if (sb.length() > 1) sb.append(',');
    sb.append(q(k)).append(':').append(q(p.getProperty(k)));
  }
  System.out.print(sb.append('}'));
}
static String q(String s) { StringBuilder b = new StringBuilder("\\"");
  for (char c : s.toCharArray()) b.append(String.format("\\\\u%04x", (int) c));
  return b.append('"').toString(); } }
"""


@pytest.fixture
def props_file(tmp_path):
    path = tmp_path / "server.properties"
    path.write_bytes(TEXT.encode("latin-1"))
    return str(path)


def test_every_rule_of_properties_load(props_file):
    assert read_properties(props_file) == EXPECTED


@pytest.mark.skipif(shutil.which("java") is None, reason="no JVM to compare with")
def test_same_pairs_as_javas_properties_load(props_file, tmp_path):
    src = tmp_path / "LoadProps.java"
    src.write_text(JAVA)
    out = subprocess.run(["java", str(src), props_file], capture_output=True, timeout=120,
                         check=True).stdout
    assert json.loads(out) == read_properties(props_file)


def test_malformed_unicode_escape_is_refused(tmp_path):
    path = tmp_path / "bad.properties"
    path.write_bytes(b"a=\\u12g4\n")
    with pytest.raises(ConfigError, match="Malformed"):
        read_properties(str(path))


def test_escaped_dn_configures_super_users(tmp_path):
    """The line Kafka needs for a DN with a comma configures kafkalite the same way."""
    path = tmp_path / "server.properties"
    path.write_text("super.users=User:CN=a\\\\,b\n")
    assert load_config(str(path))["super.users"] == "User:CN=a\\,b"
