// YCSB binding for Redis through Jedis: one connection per YCSB thread, each
// record one string value (RecordCodec), GET/SET/DEL.
//
// Properties: redis.host (default 127.0.0.1), redis.port (default 6379),
// redis.timeout_ms (default 10000).
package dev.furrballs.ycsb;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.Vector;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.exceptions.JedisException;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;

public final class RedisClient extends DB {
  private Jedis jedis;

  @Override
  public void init() throws DBException {
    String host = getProperties().getProperty("redis.host", "127.0.0.1");
    int port = Integer.parseInt(getProperties().getProperty("redis.port", "6379"));
    int timeout = Integer.parseInt(getProperties().getProperty("redis.timeout_ms", "10000"));
    try {
      jedis = new Jedis(host, port, timeout);
      jedis.ping();
    } catch (JedisException e) {
      throw new DBException("redis at " + host + ":" + port + ": " + e.getMessage());
    }
  }

  @Override
  public void cleanup() throws DBException {
    jedis.close();
  }

  private static byte[] key(String key) {
    return key.getBytes(StandardCharsets.UTF_8);
  }

  @Override
  public Status read(String table, String key, Set<String> fields,
                     Map<String, ByteIterator> result) {
    try {
      byte[] value = jedis.get(key(key));
      if (value == null) {
        return Status.NOT_FOUND;
      }
      return RecordCodec.decode(value, fields, result) ? Status.OK : Status.UNEXPECTED_STATE;
    } catch (JedisException e) {
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
      return "OK".equals(jedis.set(key(key), RecordCodec.encode(values)))
          ? Status.OK : Status.ERROR;
    } catch (JedisException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status delete(String table, String key) {
    try {
      jedis.del(key(key));
      return Status.OK;
    } catch (JedisException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
                     Vector<HashMap<String, ByteIterator>> result) {
    return Status.NOT_IMPLEMENTED;
  }
}
