// Foxglove's own WebSocket client (@foxglove/ws-protocol), remote-controlled by the e2e tests
// (tests/e2e/test_foxglove.py): every event it sees is printed as one JSON line; commands come
// as JSON lines on stdin. Messages are decoded here, independently of the server: JSON ones
// validated against @foxglove/schemas where the schema is Foxglove's (and against the
// advertised schema otherwise), protobuf ones decoded with the FileDescriptorSet the channel
// advertised.
//
//   node foxglove_client.mjs ws://127.0.0.1:8080/foxglove [subprotocol...]
//   stdin: {"op":"subscribe","topics":["/s-.../scene"]}  {"op":"unsubscribe","topics":[...]}
//          {"op":"close"}
import readline from "node:readline";

import wsProtocol from "@foxglove/ws-protocol";
import WebSocket from "ws";

import { decoderFor as decodeWith } from "./decoders.mjs";

const { FoxgloveClient } = wsProtocol;
const url = process.argv[2];
const protocols = process.argv.length > 3 ? process.argv.slice(3) : [FoxgloveClient.SUPPORTED_SUBPROTOCOL];

const print = (value) => process.stdout.write(JSON.stringify(value, (key, v) =>
  typeof v === "bigint" ? v.toString() : v) + "\n");

const ws = new WebSocket(url, protocols);
ws.on("unexpected-response", (request, response) => {
  let body = "";
  response.on("data", (chunk) => { body += chunk; });
  response.on("end", () => { print({ event: "refused", status: response.statusCode, body }); process.exit(0); });
});
const client = new FoxgloveClient({ ws });
const channels = new Map();      // id -> channel, with its decoder
const subscriptions = new Map(); // subscription id -> channel id
const byTopic = new Map();       // topic -> subscription id

function decoderFor(channel) {
  return decodeWith({
    encoding: channel.encoding,
    schemaName: channel.schemaName,
    schema: channel.encoding === "protobuf" ? Buffer.from(channel.schema, "base64") : channel.schema,
  });
}

client.on("open", () => print({ event: "open", protocol: ws.protocol }));
client.on("serverInfo", (info) => print({ event: "serverInfo", info }));
client.on("status", (status) => print({ event: "status", status }));
client.on("error", (error) => print({ event: "error", message: String(error && error.message ? error.message : error) }));
client.on("close", (event) => { print({ event: "close", code: event.code }); process.exit(0); });
client.on("advertise", (advertised) => {
  for (const channel of advertised) {
    let decode;
    try {
      decode = decoderFor(channel);
    } catch (error) {
      decode = () => ({ value: null, schemaErrors: [`schema: ${error.message}`] });
    }
    channels.set(channel.id, { ...channel, decode });
  }
  print({ event: "advertise", channels: advertised.map(({ id, topic, encoding, schemaName, schemaEncoding }) =>
    ({ id, topic, encoding, schemaName, schemaEncoding })) });
});
client.on("unadvertise", (ids) => {
  for (const id of ids) channels.delete(id);
  print({ event: "unadvertise", channelIds: ids });
});
client.on("message", ({ subscriptionId, timestamp, data }) => {
  const channel = channels.get(subscriptions.get(subscriptionId));
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  let decoded;
  try {
    decoded = channel ? channel.decode(bytes) : { value: null, schemaErrors: ["no channel"] };
  } catch (error) {
    decoded = { value: null, schemaErrors: [`decode: ${error.message}`] };
  }
  print({ event: "message", topic: channel ? channel.topic : null, subscriptionId, timestamp,
          bytes: bytes.length, ...decoded });
});

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const command = JSON.parse(line);
  if (command.op === "subscribe") {
    for (const topic of command.topics) {
      const channel = [...channels.values()].find((c) => c.topic === topic);
      if (!channel) { print({ event: "noSuchTopic", topic }); continue; }
      const id = client.subscribe(channel.id);
      subscriptions.set(id, channel.id);
      byTopic.set(topic, id);
    }
    print({ event: "subscribed", topics: command.topics });
  } else if (command.op === "unsubscribe") {
    for (const topic of command.topics) {
      const id = byTopic.get(topic);
      if (id !== undefined) { client.unsubscribe(id); byTopic.delete(topic); }
    }
    print({ event: "unsubscribed", topics: command.topics });
  } else if (command.op === "close") {
    client.close();
  }
});
