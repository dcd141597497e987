// Reads an MCAP file with Foxglove's own reader (@mcap/core), CRC checks on, and prints what
// it found as JSON, for server/record/mcap_writer_test.cc to compare with what it wrote.
//
//   node tests/web/mcap_read.mjs FILE            the indexed reader (through the summary and
//                                                the chunk indexes), then the streaming reader
//   node tests/web/mcap_read.mjs --stream FILE   only the streaming reader, up to the first
//                                                error (a file cut short)
import { open, readFile } from "node:fs/promises";
import { McapIndexedReader, McapStreamReader } from "@mcap/core";
import { crc32 } from "@foxglove/crc";

import { decompressHandlers, readableOf } from "./mcap_files.mjs";

const text = new TextDecoder();
const messageOf = (m) => ({
  channel: m.channelId,
  sequence: m.sequence,
  log_time: m.logTime.toString(),
  publish_time: m.publishTime.toString(),
  data: text.decode(m.data),
});

function readStream(bytes) {
  const reader = new McapStreamReader({
    decompressHandlers,
    validateCrcs: true,
    includeChunks: true,
  });
  reader.append(bytes);
  const messages = [];
  const records = {};
  let error = null;
  try {
    for (let record; (record = reader.nextRecord()); ) {
      records[record.type] = (records[record.type] ?? 0) + 1;
      if (record.type === "Message") messages.push(messageOf(record));
    }
  } catch (e) {
    error = String(e.message ?? e);
  }
  return { messages, records, done: reader.done(), error };
}

async function readIndexed(path) {
  const handle = await open(path, "r");
  const readable = await readableOf(handle);
  try {
    const reader = await McapIndexedReader.Initialize({ readable, decompressHandlers });
    const messages = [];
    for await (const m of reader.readMessages({ validateCrcs: true })) messages.push(messageOf(m));
    const bytes = await readFile(path);
    const stats = reader.statistics;
    return {
      header: reader.header,
      schemas: [...reader.schemasById.values()].map((s) => ({
        id: s.id, name: s.name, encoding: s.encoding, data: text.decode(s.data),
      })),
      channels: [...reader.channelsById.values()].map((c) => ({
        id: c.id, schema_id: c.schemaId, topic: c.topic, message_encoding: c.messageEncoding,
        metadata: Object.fromEntries(c.metadata),
      })),
      statistics: stats && {
        message_count: stats.messageCount.toString(),
        channel_count: stats.channelCount,
        schema_count: stats.schemaCount,
        chunk_count: stats.chunkCount,
        message_start_time: stats.messageStartTime.toString(),
        message_end_time: stats.messageEndTime.toString(),
        channel_message_counts: Object.fromEntries(
          [...stats.channelMessageCounts].map(([k, v]) => [k, v.toString()])),
      },
      chunk_indexes: reader.chunkIndexes.length,
      compressions: [...new Set(reader.chunkIndexes.map((c) => c.compression))],
      data_section_crc_ok:
        reader.dataSectionCrc === crc32(bytes.subarray(0, Number(reader.dataEndOffset))),
      messages,
      stream: readStream(bytes),
    };
  } finally {
    await handle.close();
  }
}

const args = process.argv.slice(2);
if (args[0] === "--stream") {
  console.log(JSON.stringify(readStream(await readFile(args[1]))));
} else {
  try {
    console.log(JSON.stringify(await readIndexed(args[0])));
  } catch (e) {
    console.log(JSON.stringify({ error: String(e.message ?? e) }));
  }
}
