// What the MCAP test readers share: @mcap/core's IReadable over an open file, and the zstd
// handler (fzstd) its readers decompress chunks with.
import { decompress as zstdDecompress } from "fzstd";

export const decompressHandlers = {
  zstd: (buffer, size) => {
    const out = zstdDecompress(buffer, new Uint8Array(Number(size)));
    if (out.length !== Number(size)) throw new Error(`zstd: ${out.length} bytes, not ${size}`);
    return out;
  },
};

// `handle`: a FileHandle (node:fs/promises open), read where the reader asks.
export async function readableOf(handle) {
  const { size } = await handle.stat();
  return {
    size: async () => BigInt(size),
    read: async (offset, length) => {
      const buffer = new Uint8Array(Number(length));
      await handle.read(buffer, 0, Number(length), Number(offset));
      return buffer;
    },
  };
}
