// YCSB binding for memcached through spymemcached: one client (connection)
// per YCSB thread, each record one value (RecordCodec, stored as raw bytes
// with no expiry), get/set/delete waiting for the server's answer.
//
// Properties: memcached.address (default 127.0.0.1:11211),
// memcached.timeout_ms (default 10000).
package dev.furrballs.ycsb;

import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.Vector;
import java.util.concurrent.TimeUnit;
import net.spy.memcached.AddrUtil;
import net.spy.memcached.CachedData;
import net.spy.memcached.ConnectionFactoryBuilder;
import net.spy.memcached.transcoders.Transcoder;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;

public final class MemcachedClient extends DB {
  // Raw bytes in and out, no compression or serialization.
  private static final Transcoder<byte[]> RAW = new Transcoder<byte[]>() {
    @Override
    public boolean asyncDecode(CachedData d) {
      return false;
    }

    @Override
    public CachedData encode(byte[] o) {
      return new CachedData(0, o, CachedData.MAX_SIZE);
    }

    @Override
    public byte[] decode(CachedData d) {
      return d.getData();
    }

    @Override
    public int getMaxSize() {
      return CachedData.MAX_SIZE;
    }
  };

  private net.spy.memcached.MemcachedClient client;
  private long timeoutMs;

  @Override
  public void init() throws DBException {
    String address = getProperties().getProperty("memcached.address", "127.0.0.1:11211");
    timeoutMs = Long.parseLong(getProperties().getProperty("memcached.timeout_ms", "10000"));
    try {
      client = new net.spy.memcached.MemcachedClient(
          new ConnectionFactoryBuilder()
              .setProtocol(ConnectionFactoryBuilder.Protocol.TEXT)
              .setOpTimeout(timeoutMs)
              .build(),
          AddrUtil.getAddresses(address));
    } catch (IOException e) {
      throw new DBException("memcached at " + address + ": " + e.getMessage());
    }
  }

  @Override
  public void cleanup() throws DBException {
    client.shutdown(5, TimeUnit.SECONDS);
  }

  @Override
  public Status read(String table, String key, Set<String> fields,
                     Map<String, ByteIterator> result) {
    try {
      byte[] value = client.get(key, RAW);
      if (value == null) {
        return Status.NOT_FOUND;
      }
      return RecordCodec.decode(value, fields, result) ? Status.OK : Status.UNEXPECTED_STATE;
    } catch (RuntimeException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    return insert(table, key, values);
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    try {
      boolean stored = client.set(key, 0, RecordCodec.encode(values), RAW)
          .get(timeoutMs, TimeUnit.MILLISECONDS);
      return stored ? Status.OK : Status.ERROR;
    } catch (Exception e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status delete(String table, String key) {
    try {
      client.delete(key).get(timeoutMs, TimeUnit.MILLISECONDS);
      return Status.OK;
    } catch (Exception e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
                     Vector<HashMap<String, ByteIterator>> result) {
    return Status.NOT_IMPLEMENTED;
  }
}
