/**
 * A queue prefix in braces is a hash tag: after a real matrix over two hosts (per-host queues,
 * enrollment, heartbeats, host locks, a cancelled matrix), every key in Redis is under the
 * prefix and hashes to the tag's slot, so a sharded Redis (Redis Cluster, or a proxy in front of
 * shards) can serve fsbench's and BullMQ's multi-key commands and scripts without CROSSSLOT.
 */
import { describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { CoordinatorClient } from '../cli/client.js';
import { loadSettings } from '../settings/index.js';
import { uniquePrefix } from './fixtures/redis-server.js';
import { useCluster } from './helpers/cluster.js';

const cluster = useCluster('hashtag');

/** CRC16/XMODEM, the checksum of Redis Cluster's key slots (cluster specification, "Keys distribution model"). */
function crc16(data: Buffer): number {
  let crc = 0;
  for (const byte of data) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** The slot of a key: of its hash tag (the text between the first `{` and the next `}`, when not empty), else of the whole key. */
function keySlot(key: string): number {
  const open = key.indexOf('{');
  const close = open === -1 ? -1 : key.indexOf('}', open + 1);
  const hashed = close > open + 1 ? key.slice(open + 1, close) : key;
  return crc16(Buffer.from(hashed)) % 16384;
}

interface MatrixView {
  state: string;
  progress: { stored: number; expected: number };
}

describe('a queue prefix in braces', () => {
  it('computes slots as Redis does', () => {
    // The specification's check value, and slots CLUSTER KEYSLOT gives.
    expect(crc16(Buffer.from('123456789'))).toBe(0x31c3);
    expect(keySlot('foo')).toBe(12182);
    expect(keySlot('{user1000}.following')).toBe(keySlot('{user1000}.followers'));
    // An empty first tag makes the whole key count (the specification's own example).
    expect(keySlot('foo{}{bar}')).toBe(crc16(Buffer.from('foo{}{bar}')) % 16384);
  });

  it('is accepted as a setting, and anything else with braces is not', () => {
    expect(loadSettings(['queuePrefix'], {}, { FSBENCH_QUEUE_PREFIX: '{fsbench}' }).queuePrefix).toBe('{fsbench}');
    for (const bad of ['{fsbench', 'fs{bench}', '{}', '{a}b']) {
      expect(() => loadSettings(['queuePrefix'], {}, { FSBENCH_QUEUE_PREFIX: bad })).toThrow(/FSBENCH_QUEUE_PREFIX/);
    }
  });

  it('puts every key a matrix over two hosts makes, BullMQ and fsbench alike, in the one slot of its tag', async () => {
    const prefix = `{${uniquePrefix('tag')}}`;
    const c = await cluster.coordinator({ queuePrefix: prefix });
    await cluster.agent(prefix, 'host-a', 'machine-a');
    await cluster.agent(prefix, 'host-b', 'machine-b');
    const api = new CoordinatorClient(c.url);
    const { id } = (await api.json('POST', '/v1/matrices', { name: 'tag', workload: 'noop', repetitions: 2, warmup: 1, placement: 'all', params: { value: [1, 2, 3] } })) as { id: string };
    const cancelled = (await api.json('POST', '/v1/matrices', { name: 'tag-cancelled', workload: 'noop', repetitions: 1, warmup: 0, params: { value: [1], sleep: '5s' } })) as { id: string };
    await api.json('DELETE', `/v1/matrices/${cancelled.id}`);
    let m: MatrixView | undefined;
    for (const end = Date.now() + 60_000; m?.state !== 'done' && Date.now() < end; ) {
      m = (await api.json('GET', `/v1/matrices/${id}`)) as MatrixView;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(m?.progress).toMatchObject({ stored: 12, expected: 12 });

    const redis = new Redis(cluster.redis().url);
    try {
      const keys: string[] = [];
      let cursor = '0';
      do {
        const [next, batch] = await redis.scan(cursor, 'COUNT', 1000);
        cursor = next;
        keys.push(...batch);
      } while (cursor !== '0');
      // This file's Redis serves only this test: whatever is in it, fsbench or BullMQ made.
      expect(keys.length).toBeGreaterThan(10);
      expect(keys.filter((k) => !k.startsWith(`${prefix}:`))).toEqual([]);
      const slot = keySlot(prefix);
      expect(keys.filter((k) => keySlot(k) !== slot)).toEqual([]);
      // Both kinds are there: BullMQ's queues (one per host) and fsbench's own keys.
      expect(keys.some((k) => k.endsWith(':events'))).toBe(true);
      expect(keys.some((k) => k.includes(':agent-approvals'))).toBe(true);
      console.log(JSON.stringify({ figure: 'hash-tag-keys', prefix, slot, keys: keys.length, outsideTheSlot: 0 }));
    } finally {
      redis.disconnect();
    }
  });
});
