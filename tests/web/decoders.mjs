// Decoders of Pitlane's channels, independent of the server: JSON messages validated against
// @foxglove/schemas where the schema is Foxglove's (against the channel's own JSON Schema
// otherwise), protobuf messages decoded with the channel's FileDescriptorSet by protobufjs.
// Shared by the Foxglove client (live channels) and the MCAP reader (recordings).
import foxgloveSchemas from "@foxglove/schemas/jsonschema.js";
import Ajv from "ajv";
import protobuf from "protobufjs";
import descriptor from "protobufjs/ext/descriptor/index.js";

const ajv = new Ajv({ strict: false, allErrors: true });

// `schema`: the JSON Schema's text, or the FileDescriptorSet's bytes (a Uint8Array).
// Returns bytes => { value, schemaErrors, validatedWith }.
export function decoderFor({ encoding, schemaName, schema }) {
  if (encoding === "json") {
    const foxgloveName = schemaName.startsWith("foxglove.") ? schemaName.slice(9) : null;
    const jsonSchema = foxgloveName && foxgloveSchemas[foxgloveName]
      ? foxgloveSchemas[foxgloveName] : JSON.parse(schema);
    const validate = ajv.compile(jsonSchema);
    const text = new TextDecoder("utf-8", { fatal: true });
    return (bytes) => {
      const value = JSON.parse(text.decode(bytes));
      const valid = validate(value);
      return {
        value,
        schemaErrors: valid ? [] : validate.errors.slice(0, 5),
        validatedWith: foxgloveName ? "@foxglove/schemas" : "advertised",
      };
    };
  }
  if (encoding === "protobuf") {
    const set = descriptor.FileDescriptorSet.decode(schema);
    const root = protobuf.Root.fromDescriptor(set);
    const type = root.lookupType(schemaName);
    return (bytes) => ({
      value: type.toObject(type.decode(bytes), { longs: String, enums: String, defaults: false }),
      schemaErrors: [],
      validatedWith: "FileDescriptorSet",
    });
  }
  return () => ({ value: null, schemaErrors: [`unknown encoding ${encoding}`] });
}
