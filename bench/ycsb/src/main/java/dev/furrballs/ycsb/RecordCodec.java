// The one encoding of a YCSB record as a single cache value, shared by the
// three bindings so that each system stores the same bytes: for every field,
// its name's length (2 bytes), the name (UTF-8), the value's length (4 bytes)
// and the value, big-endian. Records are written whole (the workloads set
// writeallfields=true), so a value is never patched in place.
package dev.furrballs.ycsb;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Set;
import site.ycsb.ByteArrayByteIterator;
import site.ycsb.ByteIterator;

final class RecordCodec {
  private RecordCodec() {}

  static byte[] encode(Map<String, ByteIterator> values) {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(1100);
    try (DataOutputStream out = new DataOutputStream(bytes)) {
      for (Map.Entry<String, ByteIterator> e : values.entrySet()) {
        byte[] name = e.getKey().getBytes(StandardCharsets.UTF_8);
        byte[] value = e.getValue().toArray();
        out.writeShort(name.length);
        out.write(name);
        out.writeInt(value.length);
        out.write(value);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return bytes.toByteArray();
  }

  // Adds the record's fields (all of them when `fields` is null) to `result`.
  // Returns false if the bytes are not a record this codec wrote.
  static boolean decode(byte[] data, Set<String> fields, Map<String, ByteIterator> result) {
    ByteBuffer in = ByteBuffer.wrap(data);
    try {
      while (in.hasRemaining()) {
        byte[] name = new byte[in.getShort() & 0xffff];
        in.get(name);
        byte[] value = new byte[in.getInt()];
        in.get(value);
        String field = new String(name, StandardCharsets.UTF_8);
        if (fields == null || fields.contains(field)) {
          result.put(field, new ByteArrayByteIterator(value));
        }
      }
    } catch (RuntimeException e) {
      return false;
    }
    return true;
  }
}
