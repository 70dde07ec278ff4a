// kafkajs against kafkalite: admin, idempotent gzip producer, a two-member consumer group,
// committed offsets and the offset/record admin calls. Every step runs even when an earlier
// one failed (where it can), so one run reports every incompatibility; the exit code is 1 if
// any check failed. Usage: node check.js <bootstrap>  (or KAFKA_BOOTSTRAP=host:port).
// All waits are bounded; the whole run aborts after CHECK_TIMEOUT_MS (default 150 s).
'use strict'

const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

const bootstrap = process.argv[2] || process.env.KAFKA_BOOTSTRAP
if (!bootstrap) {
  console.error('usage: node check.js <bootstrap host:port>')
  process.exit(2)
}
const TOTAL = 1000
const PARTITIONS = 3
const suffix = `${process.pid}-${Date.now()}`
const topic = `kafkajs-check-${suffix}`
const groupId = `kafkajs-group-${suffix}`
// Explicit, strictly increasing CreateTime timestamps in the past make the
// by-timestamp answers computable from what was consumed.
const T0 = Date.now() - 3600 * 1000
const failures = []

const deadlineMs = Number(process.env.CHECK_TIMEOUT_MS || 150000)
setTimeout(() => {
  console.error(`FAIL: whole check exceeded ${deadlineMs} ms; failures so far: ${JSON.stringify(failures)}`)
  process.exit(1)
}, deadlineMs).unref()

function fail (msg) {
  failures.push(msg)
  console.error(`FAIL: ${msg}`)
}
function check (cond, msg) {
  if (!cond) fail(msg)
  return cond
}
async function step (name, fn) {
  const t = Date.now()
  try {
    const r = await fn()
    console.log(`ok   ${name} (${Date.now() - t} ms)`)
    return r
  } catch (e) {
    fail(`${name}: ${e && e.name}: ${e && e.message}${e && e.type ? ` [type ${e.type}]` : ''}`)
    return undefined
  }
}
async function waitFor (what, cond, ms) {
  const until = Date.now() + ms
  while (Date.now() < until) {
    if (cond()) return true
    await new Promise(resolve => setTimeout(resolve, 50))
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`)
}

const kafka = new Kafka({
  clientId: 'kafkalite-kafkajs-check',
  brokers: [bootstrap],
  logLevel: logLevel.WARN,
  retry: { retries: 3, initialRetryTime: 100 },
  connectionTimeout: 3000,
  requestTimeout: 10000,
})

async function main () {
  const admin = kafka.admin()
  await step('admin.connect', () => admin.connect())

  await step('admin.createTopics (3 partitions)', async () => {
    const created = await admin.createTopics({
      topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }],
      waitForLeaders: true,
      timeout: 10000,
    })
    check(created === true, `createTopics returned ${created}, expected true (new topic)`)
  })

  await step('admin.describeCluster', async () => {
    const c = await admin.describeCluster()
    check(c.brokers.length === 1, `describeCluster brokers ${JSON.stringify(c.brokers)}`)
    check(typeof c.clusterId === 'string' && c.clusterId.length > 0, `clusterId ${c.clusterId}`)
    check(c.brokers.some(b => b.nodeId === c.controller), `controller ${c.controller} not among brokers`)
  })

  await step('admin.listTopics', async () => {
    const topics = await admin.listTopics()
    check(topics.includes(topic), `listTopics lacks ${topic}: ${JSON.stringify(topics)}`)
  })

  await step('admin.fetchTopicMetadata', async () => {
    const { topics } = await admin.fetchTopicMetadata({ topics: [topic] })
    const parts = topics[0].partitions.map(p => p.partitionId).sort()
    check(JSON.stringify(parts) === JSON.stringify([0, 1, 2]), `partitions ${JSON.stringify(parts)}`)
    for (const p of topics[0].partitions) {
      check(p.partitionErrorCode === 0 && p.leader >= 0, `partition metadata ${JSON.stringify(p)}`)
    }
  })

  await step('admin.describeConfigs (topic)', async () => {
    const r = await admin.describeConfigs({
      resources: [{ type: 2 /* TOPIC */, name: topic }],
      includeSynonyms: false,
    })
    const entries = r.resources[0].configEntries
    check(r.resources[0].errorCode === 0, `describeConfigs errorCode ${r.resources[0].errorCode}`)
    const cleanup = entries.find(e => e.configName === 'cleanup.policy')
    check(cleanup && cleanup.configValue === 'delete', `cleanup.policy entry ${JSON.stringify(cleanup)}`)
  })

  await step('admin.describeConfigs (broker) + alterConfigs (topic)', async () => {
    const { brokers } = await admin.describeCluster()
    const b = await admin.describeConfigs({
      resources: [{ type: 4 /* BROKER */, name: String(brokers[0].nodeId) }],
      includeSynonyms: true,
    })
    check(b.resources[0].errorCode === 0, `broker describeConfigs errorCode ${b.resources[0].errorCode}`)
    check(b.resources[0].configEntries.some(e => e.configName === 'num.partitions'),
      `broker configs lack num.partitions (${b.resources[0].configEntries.length} entries)`)
    await admin.alterConfigs({
      validateOnly: false,
      resources: [{ type: 2, name: topic, configEntries: [{ name: 'retention.ms', value: '86400000' }] }],
    })
    const t = await admin.describeConfigs({ resources: [{ type: 2, name: topic, configNames: ['retention.ms'] }] })
    const entry = t.resources[0].configEntries.find(e => e.configName === 'retention.ms')
    check(entry && entry.configValue === '86400000' && entry.isDefault === false,
      `retention.ms after alterConfigs ${JSON.stringify(entry)}`)
  })

  // Consumers first, so both members own partitions before anything is produced and every
  // message is delivered exactly once (no uncommitted handover during a rebalance).
  const received = [] // { consumer, partition, offset, key, value, headers, timestamp }
  const latestAssignment = { c1: null, c2: null }
  const consumers = {}
  for (const name of ['c1', 'c2']) {
    const consumer = kafka.consumer({
      groupId,
      sessionTimeout: 10000,
      rebalanceTimeout: 20000,
      heartbeatInterval: 500,
      maxWaitTimeInMs: 200,
    })
    consumer.on(consumer.events.GROUP_JOIN, e => {
      latestAssignment[name] = (e.payload.memberAssignment[topic] || []).slice().sort()
      console.log(`${name} joined: generation member ${e.payload.memberId} leader=${e.payload.isLeader} ` +
                  `assignment ${JSON.stringify(latestAssignment[name])}`)
    })
    consumer.on(consumer.events.CRASH, e => fail(`${name} crashed: ${e.payload.error && e.payload.error.message}`))
    consumers[name] = consumer
    await step(`${name}.connect+subscribe+run`, async () => {
      await consumer.connect()
      await consumer.subscribe({ topics: [topic], fromBeginning: true })
      await consumer.run({
        autoCommit: false,
        eachMessage: async ({ partition, message }) => {
          received.push({
            consumer: name,
            partition,
            offset: Number(message.offset),
            key: message.key && message.key.toString(),
            value: message.value && message.value.toString(),
            headers: Object.fromEntries(Object.entries(message.headers || {})
              .map(([k, v]) => [k, v && v.toString()])),
            timestamp: Number(message.timestamp),
          })
        },
      })
    })
  }

  const balanced = () => {
    const a = latestAssignment.c1
    const b = latestAssignment.c2
    if (!a || !b || a.length === 0 || b.length === 0) return false
    const all = [...a, ...b].sort()
    return JSON.stringify(all) === JSON.stringify([0, 1, 2])
  }
  await step('group: both members assigned, disjoint, covering all 3 partitions', () =>
    waitFor(`balanced assignment (latest: ${JSON.stringify(latestAssignment)})`, balanced, 40000))

  await step('admin.describeGroups (2 members, Stable)', async () => {
    const { groups } = await admin.describeGroups([groupId])
    const g = groups[0]
    check(g.errorCode === 0, `describeGroups errorCode ${g.errorCode}`)
    check(g.state === 'Stable', `group state ${g.state}, expected Stable`)
    check(g.protocolType === 'consumer', `protocolType ${g.protocolType}`)
    check(g.members.length === 2, `group has ${g.members.length} members, expected 2`)
    for (const m of g.members) {
      check(m.memberAssignment && m.memberAssignment.length > 0, `member ${m.memberId} has no assignment bytes`)
    }
  })

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await step('producer.connect (idempotent, InitProducerId)', () => producer.connect())
  await step(`producer.send ${TOTAL} keyed messages with headers, gzip`, async () => {
    for (let start = 0; start < TOTAL; start += 100) {
      const messages = []
      for (let i = start; i < Math.min(start + 100, TOTAL); i++) {
        messages.push({
          key: `key-${i % 37}`,
          value: `value-${i}`,
          headers: { idx: String(i), origin: 'kafkajs' },
          timestamp: String(T0 + i * 1000),
        })
      }
      const meta = await producer.send({ topic, messages, compression: CompressionTypes.GZIP, acks: -1 })
      for (const m of meta) check(m.errorCode === 0, `produce metadata ${JSON.stringify(m)}`)
    }
  })

  await step(`consume ${TOTAL} messages across the group`, () =>
    waitFor(`${TOTAL} messages (have ${received.length})`, () => received.length >= TOTAL, 60000))
  // A short grace period lets any duplicate show up before it is counted.
  await new Promise(resolve => setTimeout(resolve, 1000))

  const byIdx = new Map()
  const lastOffset = {} // partition -> highest offset consumed
  const owner = {} // partition -> consumer that delivered it
  for (const r of received) {
    const idx = Number(r.headers.idx)
    if (byIdx.has(idx)) {
      fail(`message ${idx} delivered twice (${byIdx.get(idx).consumer} p${byIdx.get(idx).partition}@${byIdx.get(idx).offset}, ` +
           `${r.consumer} p${r.partition}@${r.offset})`)
      continue
    }
    byIdx.set(idx, r)
    check(r.value === `value-${idx}`, `message ${idx}: value ${r.value}`)
    check(r.key === `key-${idx % 37}`, `message ${idx}: key ${r.key}`)
    check(r.headers.origin === 'kafkajs', `message ${idx}: headers ${JSON.stringify(r.headers)}`)
    check(r.timestamp === T0 + idx * 1000, `message ${idx}: timestamp ${r.timestamp}, expected ${T0 + idx * 1000}`)
    lastOffset[r.partition] = Math.max(lastOffset[r.partition] ?? -1, r.offset)
    if (owner[r.partition] && owner[r.partition] !== r.consumer) {
      fail(`partition ${r.partition} delivered by both consumers`)
    }
    owner[r.partition] = r.consumer
  }
  check(byIdx.size === TOTAL, `received ${byIdx.size} distinct messages, expected ${TOTAL}`)
  check(new Set(Object.values(owner)).size === 2, `only ${JSON.stringify(owner)} delivered messages`)
  for (const p of [0, 1, 2]) {
    const offsets = received.filter(r => r.partition === p).map(r => r.offset)
    check(offsets.every((o, i) => o === i), `partition ${p}: offsets not 0..n-1 in order: ${offsets.slice(0, 10)}...`)
  }
  // The same key always lands in the same partition (murmur2 default partitioner).
  const keyPartition = {}
  for (const r of byIdx.values()) {
    if (keyPartition[r.key] !== undefined && keyPartition[r.key] !== r.partition) {
      fail(`key ${r.key} in partitions ${keyPartition[r.key]} and ${r.partition}`)
    }
    keyPartition[r.key] = r.partition
  }

  await step('consumer.commitOffsets (each member its own partitions)', async () => {
    for (const name of ['c1', 'c2']) {
      const mine = Object.keys(owner).filter(p => owner[p] === name)
      if (mine.length === 0) continue
      await consumers[name].commitOffsets(mine.map(p => ({
        topic, partition: Number(p), offset: String(lastOffset[p] + 1),
      })))
    }
  })

  await step('admin.fetchOffsets == consumed end', async () => {
    const res = await admin.fetchOffsets({ groupId, topics: [topic] })
    const parts = res[0].partitions
    check(parts.length === PARTITIONS, `fetchOffsets partitions ${JSON.stringify(parts)}`)
    for (const p of parts) {
      check(Number(p.offset) === (lastOffset[p.partition] ?? -1) + 1,
        `committed offset p${p.partition}=${p.offset}, expected ${(lastOffset[p.partition] ?? -1) + 1}`)
    }
  })

  await step('consumers.disconnect', async () => {
    await Promise.all(Object.values(consumers).map(c => c.disconnect()))
  })
  await step('producer.disconnect', () => producer.disconnect())

  await step('admin.describeGroups after leave (Empty, 0 members)', async () => {
    const { groups } = await admin.describeGroups([groupId])
    check(groups[0].state === 'Empty', `group state ${groups[0].state}, expected Empty`)
    check(groups[0].members.length === 0, `members ${groups[0].members.length}`)
  })

  await step('admin.listGroups includes the group', async () => {
    const { groups } = await admin.listGroups()
    check(groups.some(g => g.groupId === groupId), `listGroups lacks ${groupId}: ${JSON.stringify(groups)}`)
  })

  await step('admin.fetchTopicOffsets', async () => {
    const offs = await admin.fetchTopicOffsets(topic)
    check(offs.length === PARTITIONS, `fetchTopicOffsets ${JSON.stringify(offs)}`)
    let total = 0
    for (const o of offs) {
      check(Number(o.low) === 0, `p${o.partition} low ${o.low}`)
      check(Number(o.high) === Number(o.offset), `p${o.partition} high ${o.high} != offset ${o.offset}`)
      check(Number(o.high) === (lastOffset[o.partition] ?? -1) + 1,
        `p${o.partition} high ${o.high}, consumed up to ${lastOffset[o.partition]}`)
      total += Number(o.high) - Number(o.low)
    }
    check(total === TOTAL, `fetchTopicOffsets total ${total}, expected ${TOTAL}`)
  })

  await step('admin.fetchTopicOffsetsByTimestamp', async () => {
    // Per partition: the first offset whose timestamp is >= the query time.
    const expectAt = ts => [0, 1, 2].map(p => {
      const hits = [...byIdx.values()].filter(r => r.partition === p && r.timestamp >= ts)
      return hits.length ? Math.min(...hits.map(r => r.offset)) : (lastOffset[p] ?? -1) + 1
    })
    for (const ts of [T0 - 1000, T0 + 500 * 1000 + 1, T0 + 999 * 1000, T0 + 10_000 * 1000]) {
      const got = await admin.fetchTopicOffsetsByTimestamp(topic, ts)
      const want = expectAt(ts)
      for (const { partition, offset } of got) {
        check(Number(offset) === want[partition],
          `byTimestamp(${ts - T0} ms after T0) p${partition}=${offset}, expected ${want[partition]}`)
      }
    }
  })

  await step('admin.setOffsets + fetchOffsets (group is empty)', async () => {
    await admin.setOffsets({ groupId, topic, partitions: [{ partition: 0, offset: '1' }] })
    const res = await admin.fetchOffsets({ groupId, topics: [topic] })
    const p0 = res[0].partitions.find(p => p.partition === 0)
    check(Number(p0.offset) === 1, `after setOffsets p0 committed ${p0.offset}, expected 1`)
  })

  await step('admin.deleteTopicRecords + fetchTopicOffsets low', async () => {
    const cut = { 0: 2, 1: 1, 2: 0 }
    await admin.deleteTopicRecords({
      topic,
      partitions: Object.entries(cut).map(([p, o]) => ({ partition: Number(p), offset: String(o) })),
    })
    const offs = await admin.fetchTopicOffsets(topic)
    for (const o of offs) {
      const want = Math.min(cut[o.partition], Number(o.high))
      check(Number(o.low) === want, `after deleteTopicRecords p${o.partition} low ${o.low}, expected ${want}`)
    }
    // "-1" means up to the high watermark, as in Kafka's DeleteRecords.
    await admin.deleteTopicRecords({ topic, partitions: [{ partition: 2, offset: '-1' }] })
    const after = await admin.fetchTopicOffsets(topic)
    const p2 = after.find(o => o.partition === 2)
    check(Number(p2.low) === Number(p2.high), `after deleteTopicRecords(-1) p2 low ${p2.low} high ${p2.high}`)
  })

  await step('admin.createPartitions (3 -> 4)', async () => {
    await admin.createPartitions({ topicPartitions: [{ topic, count: 4 }] })
    const { topics } = await admin.fetchTopicMetadata({ topics: [topic] })
    check(topics[0].partitions.length === 4, `partitions after createPartitions ${topics[0].partitions.length}`)
  })

  await step('admin.deleteGroups', async () => {
    const res = await admin.deleteGroups([groupId])
    check(res[0].errorCode === 0, `deleteGroups ${JSON.stringify(res)}`)
    const { groups } = await admin.listGroups()
    check(!groups.some(g => g.groupId === groupId), 'group still listed after deleteGroups')
  })

  await step('admin.deleteTopics', async () => {
    await admin.deleteTopics({ topics: [topic], timeout: 10000 })
    const topics = await admin.listTopics()
    check(!topics.includes(topic), 'topic still listed after deleteTopics')
  })

  await step('admin.disconnect', () => admin.disconnect())
}

main().then(() => {
  if (failures.length) {
    console.error(`\n${failures.length} check(s) failed:\n - ${failures.join('\n - ')}`)
    process.exit(1)
  }
  console.log('ALL KAFKAJS CHECKS PASSED')
  process.exit(0)
}, e => {
  console.error(`FAIL: unexpected error: ${e && e.stack}`)
  process.exit(1)
})
