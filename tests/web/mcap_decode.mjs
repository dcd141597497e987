// Reads a recording with Foxglove's own MCAP reader (@mcap/core): through its summary and
// chunk indexes, every CRC checked, and decodes every message with its channel's schema
// (decoders.mjs). Prints one JSON object: the statistics, per topic its count, schema,
// encoding and schema errors, and the decoded messages of the topics asked for.
//
//   node tests/web/mcap_decode.mjs FILE [--keep=TOPIC_PREFIX ...] [--topic=TOPIC ...] [--seek=NS]
//
// --keep: keep every decoded message of the topics starting with the prefix (others: their
// first and last). --topic: read only these topics (through the index). --seek: only time
// reading the first message from log time NS on (an indexed reader's seek), in
// milliseconds, instead of reading every message.
import { open, readFile } from "node:fs/promises";
import { McapIndexedReader } from "@mcap/core";
import { crc32 } from "@foxglove/crc";

import { decoderFor } from "./decoders.mjs";
import { decompressHandlers, readableOf } from "./mcap_files.mjs";
const args = process.argv.slice(2);
const path = args.find((a) => !a.startsWith("--"));
const keep = args.filter((a) => a.startsWith("--keep=")).map((a) => a.slice(7));
const seek = args.find((a) => a.startsWith("--seek="));
const onlyTopics = args.filter((a) => a.startsWith("--topic=")).map((a) => a.slice(8));
const print = (value) => process.stdout.write(JSON.stringify(value, (key, v) =>
  typeof v === "bigint" ? v.toString() : v) + "\n");

const handle = await open(path, "r");
try {
  const { size } = await handle.stat();
  const readable = await readableOf(handle);
  const opened = performance.now();
  const reader = await McapIndexedReader.Initialize({ readable, decompressHandlers });
  const initialize_ms = performance.now() - opened;
  const decoders = new Map();
  for (const channel of reader.channelsById.values()) {
    const schema = reader.schemasById.get(channel.schemaId);
    decoders.set(channel.id, decoderFor({
      encoding: channel.messageEncoding,
      schemaName: schema.name,
      schema: schema.encoding === "protobuf" ? schema.data : new TextDecoder().decode(schema.data),
    }));
  }
  const topics = {};
  let lastTime = -1n;
  let outOfOrder = 0;
  const everything = seek ? [] : reader.readMessages({
    validateCrcs: true, ...(onlyTopics.length > 0 ? { topics: onlyTopics } : {}),
  });
  for await (const m of everything) {
    const channel = reader.channelsById.get(m.channelId);
    const schema = reader.schemasById.get(channel.schemaId);
    const entry = topics[channel.topic] ??= {
      count: 0, schema: schema.name, encoding: channel.messageEncoding, schema_errors: 0,
      first_errors: [], messages: [], first: null, last: null,
      first_time: m.logTime.toString(), last_time: null,
    };
    if (m.logTime < lastTime) ++outOfOrder;
    lastTime = m.logTime;
    const decoded = decoders.get(m.channelId)(m.data);
    ++entry.count;
    entry.last_time = m.logTime.toString();
    if (decoded.schemaErrors.length > 0) {
      ++entry.schema_errors;
      if (entry.first_errors.length < 3) entry.first_errors.push(decoded.schemaErrors);
    }
    const message = { log_time: m.logTime.toString(), value: decoded.value };
    if (keep.some((prefix) => channel.topic.startsWith(prefix))) entry.messages.push(message);
    entry.first ??= message;
    entry.last = message;
  }
  let seek_ms = null;
  if (seek) {
    const start = performance.now();
    let n = 0;
    for await (const m of reader.readMessages({ startTime: BigInt(seek.slice(7)), validateCrcs: true })) {
      if (++n >= 1) break;
    }
    seek_ms = performance.now() - start;
  }
  const bytes = seek ? null : await readFile(path);
  const stats = reader.statistics;
  print({
    ok: true,
    size,
    initialize_ms,
    seek_ms,
    out_of_order: outOfOrder,
    data_section_crc_ok: bytes === null ? null
      : reader.dataSectionCrc === crc32(bytes.subarray(0, Number(reader.dataEndOffset))),
    statistics: {
      message_count: stats.messageCount.toString(),
      channel_count: stats.channelCount,
      chunk_count: stats.chunkCount,
    },
    compressions: [...new Set(reader.chunkIndexes.map((c) => c.compression))],
    topics,
  });
} catch (e) {
  print({ ok: false, error: String(e.stack ?? e) });
} finally {
  await handle.close();
}
