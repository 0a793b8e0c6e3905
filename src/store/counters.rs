//! Counters that replicas share, for quotas and `[limits]`: what one call spends of each
//! quota that applies to it, checked and taken in Redis by one Lua script — one round trip,
//! atomic, no lock — on Redis's clock. All the counters of a call are checked first and taken
//! only if every one has room, so a refused call spends nothing.
//!
//! Keys, under `PREFIX:quota:`: a rate's theoretical arrival time (GCRA, microseconds), a
//! window's count (the window in the key, expiring with it), and the calls in flight of a
//! concurrency cap (a sorted set of call tokens scored by when their lease ends, so that the
//! calls of a replica that died lapse).

use std::{sync::LazyLock, time::Duration};

use super::{Store, StoreError, records::millis, redis::failure};

const KIND: &str = "quota counter";

/// What one call spends of one counter.
#[derive(Debug, Clone, PartialEq)]
pub struct Counter {
    /// The counter's key, below the store's prefix (`quota:NAME:WHO…`).
    pub key: String,
    pub count: Count,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Count {
    /// At most `limit` calls per `period`, evenly refilled (GCRA): a burst of `limit`, then
    /// one every `period / limit`.
    Rate { limit: u32, period: Duration },
    /// At most `limit` calls in fixed window number `window`, which ends in `ends_in`.
    Window {
        limit: u64,
        window: u64,
        ends_in: Duration,
    },
    /// At most `limit` calls at once; each holds its place until released, or for `lease`.
    Concurrent { limit: u32, lease: Duration },
}

/// How a call's counters took it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    Admitted,
    /// Counter number `index` has no room; it may have in `retry_after`.
    Refused {
        index: usize,
        retry_after: Duration,
    },
}

/// Checks every counter (`KEYS`) and takes all of them, or none. `ARGV[1]`: the call's token
/// (its place in concurrency sets); then three arguments per counter: its kind (`r`, `w`,
/// `c`) and two numbers: a rate's emission interval and period (µs), a window's limit and
/// time left (ms), a cap's limit and lease (ms). Answers `{0}`, or `{i, retry_ms}` for the
/// first counter without room.
const COUNT_SCRIPT: &str = on_redis_clock!(
    r"
local n = #KEYS
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function arg(i, j) return ARGV[1 + (i - 1) * 3 + j] end
local next_tat = {}
for i = 1, n do
  local kind, a, b = arg(i, 1), tonumber(arg(i, 2)), tonumber(arg(i, 3))
  if kind == 'r' then
    local tat = tonumber(redis.call('GET', KEYS[i]) or '0')
    if tat < now_us then tat = now_us end
    local new = tat + a
    if new - now_us > b then return {i, math.ceil((new - now_us - b) / 1000)} end
    next_tat[i] = new
  elseif kind == 'w' then
    local used = tonumber(redis.call('GET', KEYS[i]) or '0')
    if used >= a then return {i, redis.call('PTTL', KEYS[i])} end
  else
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
    if redis.call('ZCARD', KEYS[i]) >= a then
      local first = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
      local wait = 1000
      if first[2] then wait = math.min(1000, tonumber(first[2]) - now) end
      return {i, wait}
    end
  end
end
for i = 1, n do
  local kind, a, b = arg(i, 1), tonumber(arg(i, 2)), tonumber(arg(i, 3))
  if kind == 'r' then
    redis.call('SET', KEYS[i], string.format('%.0f', next_tat[i]), 'PX', math.ceil((next_tat[i] - now_us) / 1000) + 1000)
  elseif kind == 'w' then
    if redis.call('INCR', KEYS[i]) == 1 then redis.call('PEXPIRE', KEYS[i], b) end
  else
    redis.call('ZADD', KEYS[i], now + b, ARGV[1])
    redis.call('PEXPIRE', KEYS[i], b)
  end
end
return {0}
"
);

static COUNT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(COUNT_SCRIPT));

impl Store {
    /// Checks and takes `counters` for a call known by `token`, in Redis; `Ok(None)` without
    /// Redis (the caller counts in its process).
    pub async fn count(
        &self,
        token: &str,
        counters: &[Counter],
    ) -> Result<Option<Counted>, StoreError> {
        let Some(redis) = &self.redis else {
            return Ok(None);
        };
        // Known down (the beats find out when it answers again): no call waits for it.
        if self.health.up_gauge.get() == 0 {
            return Err(StoreError::Unreachable(
                "Redis did not answer lately".into(),
            ));
        }
        let mut invocation = COUNT.prepare_invoke();
        invocation.arg(token);
        for counter in counters {
            let key = format!("{}:quota:{}", redis.prefix(), counter.key);
            match counter.count {
                Count::Window { window, .. } => invocation.key(format!("{key}:{window}")),
                _ => invocation.key(key),
            };
            let (kind, a, b) = match counter.count {
                Count::Rate { limit, period } => {
                    let period = u64::try_from(period.as_micros()).unwrap_or(u64::MAX);
                    ("r", (period / u64::from(limit.max(1))).max(1), period)
                }
                Count::Window { limit, ends_in, .. } => ("w", limit, millis(ends_in)),
                Count::Concurrent { limit, lease } => ("c", u64::from(limit), millis(lease)),
            };
            invocation.arg(kind).arg(a).arg(b);
        }
        let answer: Vec<i64> = self.health.of(invocation
            .invoke_async(&mut redis.connection())
            .await
            .map_err(failure(KIND)))?;
        Ok(Some(match answer.as_slice() {
            [0] => Counted::Admitted,
            [index, retry_ms] if *index >= 1 => Counted::Refused {
                index: (*index - 1) as usize,
                retry_after: Duration::from_millis((*retry_ms).max(1) as u64),
            },
            other => {
                return Err(StoreError::Unreadable {
                    kind: KIND,
                    reason: format!("the count script answered {other:?}"),
                });
            }
        }))
    }

    /// Gives back the places the call known by `token` held in the concurrency caps among
    /// `counters` (in Redis; nothing to do without it).
    pub async fn uncount(&self, token: &str, counters: &[Counter]) {
        let Some(redis) = &self.redis else {
            return;
        };
        let mut pipe = redis::pipe();
        for counter in counters {
            if let Count::Concurrent { .. } = counter.count {
                let key = format!("{}:quota:{}", redis.prefix(), counter.key);
                pipe.zrem(key, token).ignore();
            }
        }
        let done: Result<(), redis::RedisError> = pipe.query_async(&mut redis.connection()).await;
        if let Err(error) = done {
            // Its lease ends it anyway.
            tracing::debug!(%error, "a concurrent call's place was not given back");
        }
    }
}
