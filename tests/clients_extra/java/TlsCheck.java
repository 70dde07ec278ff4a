// Java's own reading of certificate subjects (the TLS clients check is ClientsCheck.java):
//   java TlsCheck <pem file>...
// prints X500Principal.getName(RFC2253) of every certificate in the files, one a line as the
// hex of its UTF-8 (a DN may hold a CR): the subject string Kafka's
// DefaultKafkaPrincipalBuilder makes a TLS principal of.
import java.io.FileInputStream;
import java.nio.charset.StandardCharsets;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.HexFormat;
import javax.security.auth.x500.X500Principal;

public class TlsCheck {
    public static void main(String[] args) throws Exception {
        CertificateFactory factory = CertificateFactory.getInstance("X.509");
        for (String file : args) {
            try (FileInputStream in = new FileInputStream(file)) {
                for (var cert : factory.generateCertificates(in)) {
                    String dn = ((X509Certificate) cert).getSubjectX500Principal()
                            .getName(X500Principal.RFC2253);
                    System.out.println(HexFormat.of().formatHex(dn.getBytes(StandardCharsets.UTF_8)));
                }
            }
        }
    }
}
