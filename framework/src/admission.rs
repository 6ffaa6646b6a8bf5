//! Who may connect: the total and per-IP connection limits, the per-IP
//! accept rate, and the cap on connections accepted but not yet admitted
//! (WebSocket upgrades and PROXY headers in progress). A connection holds a
//! [`Permit`] for its lifetime.
//!
//! Per-IP state is keyed by [`ip_key`]: an IPv4 address, or an IPv6
//! address's network prefix (a /64 by default), so that one host rotating
//! through the addresses of its network counts once. The state is split in
//! [`SHARDS`] shards, each behind its own lock: a connection count leaves
//! its map when it falls to 0, and the accept-rate states of one shard at a
//! time are pruned (governor's `retain_recent`), never the whole table.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use governor::clock::DefaultClock;
use governor::state::keyed::HashMapStateStore;
use governor::{Quota, RateLimiter};

use crate::config::ServerConfig;
use crate::sync::lock;

/// Shards of the per-IP state.
const SHARDS: usize = 16;
/// How often (at most) one shard's expired accept-rate states are pruned,
/// in milliseconds: every shard is visited every `SHARDS` times this.
const PRUNE_EVERY_MS: u64 = 100;

type KeyedLimiter = RateLimiter<IpAddr, HashMapStateStore<IpAddr>, DefaultClock>;

/// The address the per-IP limits count `ip` under: an IPv4-mapped IPv6
/// address (`::ffff:a.b.c.d`) is its IPv4 address, any other IPv6 address
/// is its first `v6_prefix_len` bits (the rest zeroed).
pub(crate) fn ip_key(ip: IpAddr, v6_prefix_len: u8) -> IpAddr {
    match normalize(ip) {
        IpAddr::V6(v6) => {
            let bits = u32::from(v6_prefix_len.min(128));
            let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
        }
        v4 => v4,
    }
}

/// `ip` with an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) turned into
/// the IPv4 address it stands for.
pub(crate) fn normalize(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

/// `addr` with its IP [normalized](normalize).
pub(crate) fn normalize_addr(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(normalize(addr.ip()), addr.port())
}

/// One key's places.
#[derive(Debug, Default)]
struct Places {
    /// Connections open, sessions that wait for their client included.
    open: usize,
    /// Sessions among them that wait for their client to resume them.
    waiting: usize,
    /// Connections among them admitted past the limit to resume one of
    /// those ([`Permit::on_probation`]).
    probation: usize,
}

/// One shard of the per-IP state.
struct Shard {
    /// Places per key; a key leaves when its count of open falls to 0.
    open: Mutex<HashMap<IpAddr, Places>>,
    /// Accept rate per key; `None` when the rate is not limited.
    rate: Option<KeyedLimiter>,
}

/// The server's admission control.
pub(crate) struct Admission {
    total: AtomicUsize,
    /// Sessions among `total` that wait for their client.
    waiting: AtomicUsize,
    /// Connections among `total` admitted past `max_total` to resume one of
    /// those.
    probation: AtomicUsize,
    pending: AtomicUsize,
    shards: Box<[Shard]>,
    /// Where the next prune happens, and when (ms since `started`).
    prune_cursor: AtomicUsize,
    next_prune_ms: AtomicU64,
    started: Instant,
    max_total: usize,
    max_per_ip: usize,
    max_pending: usize,
    accepts_per_ip: usize,
    exempt_loopback: bool,
    v6_prefix_len: u8,
    trusted_proxies: Box<[IpAddr]>,
}

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The server holds its maximum of connections.
    Total(usize),
    /// The peer's address (or network) holds its maximum of connections.
    PerIp(usize),
    /// The peer's address (or network) opened connections too fast.
    Rate(usize),
    /// Too many connections are being upgraded (or their PROXY header read).
    Pending(usize),
}

impl Refusal {
    /// The refusal's name in the metrics.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Total(_) => "total",
            Self::PerIp(_) => "per_ip",
            Self::Rate(_) => "rate",
            Self::Pending(_) => "pending",
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Total(max) => write!(f, "the server holds its maximum of {max} connections"),
            Self::PerIp(max) => write!(f, "your address holds its maximum of {max} connections"),
            Self::Rate(max) => write!(
                f,
                "your address opened more than {max} connections in the window"
            ),
            Self::Pending(max) => write!(
                f,
                "the server is setting up its maximum of {max} connections"
            ),
        }
    }
}

/// One admitted connection; dropping it gives its place back.
///
/// A session that waits for its client keeps its place (it holds memory
/// and may be resumed), so a client could not reconnect to resume it from
/// an address at its limit, or to a server at its limit. Each waiting
/// session lets one connection past those limits, on probation: its first
/// frame must be a `RESUME` (of a session of its own address, when it came
/// past its address's limit), which then takes the new place and gives
/// the old one back; anything else closes it.
pub(crate) struct Permit {
    admission: Arc<Admission>,
    key: Option<IpAddr>,
    /// Admitted past its address's limit, to resume a waiting session of
    /// that address.
    past_address: bool,
    /// Admitted past the server's limit, to resume a waiting session.
    past_total: bool,
    /// Held by a session that waits for its client.
    waiting: bool,
}

impl Permit {
    /// Whether this connection was admitted past a limit, to resume a
    /// session and nothing else.
    pub(crate) fn on_probation(&self) -> bool {
        self.past_address || self.past_total
    }

    /// Whether this connection was admitted past its address's limit: it
    /// may resume a session of that address only.
    pub(crate) fn past_address_limit(&self) -> bool {
        self.past_address
    }

    /// The address (or network) the place counts against; `None` when
    /// exempt (loopback, with `exempt_loopback`).
    pub(crate) fn key(&self) -> Option<IpAddr> {
        self.key
    }

    /// Counts the place as a waiting session's (it stays one until it
    /// is dropped: a resumed session takes its new link's place).
    pub(crate) fn mark_waiting(&mut self) {
        if !self.waiting {
            self.waiting = true;
            self.admission.waiting.fetch_add(1, Ordering::AcqRel);
            self.update(|places| places.waiting += 1);
        }
    }

    /// Ends the probation: the connection resumed a session, whose old
    /// place is given back.
    pub(crate) fn confirm(&mut self) {
        if self.past_total {
            self.past_total = false;
            self.admission.probation.fetch_sub(1, Ordering::AcqRel);
        }
        if self.past_address {
            self.past_address = false;
            self.update(|places| places.probation -= 1);
        }
    }

    fn update(&self, change: impl FnOnce(&mut Places)) {
        if let Some(key) = self.key {
            let mut open = lock(&self.admission.shard(key).open);
            if let Some(places) = open.get_mut(&key) {
                change(places);
            }
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.admission.total.fetch_sub(1, Ordering::AcqRel);
        if self.waiting {
            self.admission.waiting.fetch_sub(1, Ordering::AcqRel);
        }
        if self.past_total {
            self.admission.probation.fetch_sub(1, Ordering::AcqRel);
        }
        if let Some(key) = self.key {
            let mut open = lock(&self.admission.shard(key).open);
            if let Some(places) = open.get_mut(&key) {
                places.open -= 1;
                places.waiting -= usize::from(self.waiting);
                places.probation -= usize::from(self.past_address);
                if places.open == 0 {
                    open.remove(&key);
                }
            }
        }
    }
}

/// A place among the connections being set up (a WebSocket upgrade or a
/// PROXY header in progress); dropping it gives the place back.
pub(crate) struct Pending {
    admission: Arc<Admission>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.admission.pending.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The accept-rate quota: `accepts` per `window`, all of them at once if
/// they come together. `None` when the rate is not limited (a zero window).
fn quota(accepts: usize, window: std::time::Duration) -> Option<Quota> {
    let burst = NonZeroU32::new(u32::try_from(accepts).unwrap_or(u32::MAX))?;
    let period = window / burst.get();
    Some(Quota::with_period(period)?.allow_burst(burst))
}

impl Admission {
    pub(crate) fn new(config: &ServerConfig) -> Self {
        let quota = quota(config.accepts_per_ip, config.accept_window);
        let shards = (0..SHARDS)
            .map(|_| Shard {
                open: Mutex::default(),
                rate: quota.map(RateLimiter::hashmap),
            })
            .collect();
        Self {
            total: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            probation: AtomicUsize::new(0),
            pending: AtomicUsize::new(0),
            shards,
            prune_cursor: AtomicUsize::new(0),
            next_prune_ms: AtomicU64::new(PRUNE_EVERY_MS),
            started: Instant::now(),
            max_total: config.max_connections,
            max_per_ip: config.max_connections_per_ip,
            max_pending: config.max_pending_upgrades,
            accepts_per_ip: config.accepts_per_ip,
            exempt_loopback: config.exempt_loopback,
            v6_prefix_len: config.ipv6_prefix_len,
            trusted_proxies: config
                .trusted_proxies
                .iter()
                .map(|ip| normalize(*ip))
                .collect(),
        }
    }

    fn shard(&self, key: IpAddr) -> &Shard {
        let mut hasher = DefaultHasher::new();
        key.hash(&mut hasher);
        &self.shards[hasher.finish() as usize % SHARDS]
    }

    /// Whether `ip` is a trusted proxy, which must start its connections
    /// with a PROXY protocol header.
    pub(crate) fn is_trusted_proxy(&self, ip: IpAddr) -> bool {
        !self.trusted_proxies.is_empty() && self.trusted_proxies.contains(&normalize(ip))
    }

    /// Takes one of the `max_total` places, if one is free.
    fn take_place(&self, max_total: usize) -> bool {
        self.total
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |total| {
                (total < max_total).then_some(total + 1)
            })
            .is_ok()
    }

    /// Admits a connection from `ip`, or says why not.
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Permit, Refusal> {
        self.prune_some();
        let ip = normalize(ip);
        let max_total = self.max_total;
        let past_total = !self.take_place(max_total);
        if past_total {
            // At the limit, a place for each waiting session not yet being
            // resumed by a connection on probation.
            let waiting = self.waiting.load(Ordering::Acquire);
            self.probation
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |probation| {
                    (probation < waiting).then_some(probation + 1)
                })
                .map_err(|_| Refusal::Total(max_total))?;
        }
        // A place may have come free meanwhile: then it is taken instead.
        let past_total = past_total && {
            let freed = self.take_place(max_total);
            if freed {
                self.probation.fetch_sub(1, Ordering::AcqRel);
            } else {
                self.total.fetch_add(1, Ordering::AcqRel);
            }
            !freed
        };
        // From here on, dropping the permit gives the place back.
        let mut permit = Permit {
            admission: Arc::clone(self),
            key: None,
            past_address: false,
            past_total,
            waiting: false,
        };
        if self.exempt_loopback && ip.is_loopback() {
            return Ok(permit);
        }
        let key = ip_key(ip, self.v6_prefix_len);
        let shard = self.shard(key);
        let mut open = lock(&shard.open);
        let (count, spare) = open.get(&key).map_or((0, 0), |places| {
            (places.open, places.waiting.saturating_sub(places.probation))
        });
        // At the limit, a place for each waiting session not yet being
        // resumed by a connection on probation.
        let past_address = count >= self.max_per_ip;
        if past_address && spare == 0 {
            return Err(Refusal::PerIp(self.max_per_ip));
        }
        match &shard.rate {
            Some(rate) if rate.check_key(&key).is_err() => {
                return Err(Refusal::Rate(self.accepts_per_ip));
            }
            Some(_) => {}
            None if self.accepts_per_ip == 0 => return Err(Refusal::Rate(0)),
            None => {}
        }
        let places = open.entry(key).or_default();
        places.open += 1;
        places.probation += usize::from(past_address);
        permit.key = Some(key);
        permit.past_address = past_address;
        Ok(permit)
    }

    /// A place among the connections being set up, or a refusal when
    /// [`ServerConfig::max_pending_upgrades`] are.
    pub(crate) fn begin_pending(self: &Arc<Self>) -> Result<Pending, Refusal> {
        let max = self.max_pending;
        self.pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |pending| {
                (pending < max).then_some(pending + 1)
            })
            .map(|_| Pending {
                admission: Arc::clone(self),
            })
            .map_err(|_| Refusal::Pending(max))
    }

    /// Prunes the expired accept-rate states of one shard, when one is due:
    /// bounded work on one shard's lock, never a scan of everything.
    fn prune_some(&self) {
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let due = self.next_prune_ms.load(Ordering::Acquire);
        if now < due
            || self
                .next_prune_ms
                .compare_exchange(
                    due,
                    now + PRUNE_EVERY_MS,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_err()
        {
            return;
        }
        let index = self.prune_cursor.fetch_add(1, Ordering::Relaxed) % SHARDS;
        if let Some(rate) = &self.shards[index].rate {
            rate.retain_recent();
            rate.shrink_to_fit();
        }
    }

    /// Accept-rate states held, over every shard (for tests).
    #[cfg(test)]
    fn rate_states(&self) -> usize {
        self.shards
            .iter()
            .filter_map(|shard| shard.rate.as_ref())
            .map(KeyedLimiter::len)
            .sum()
    }

    /// Keys with open connections, over every shard (for tests).
    #[cfg(test)]
    fn open_keys(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| lock(&shard.open).len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn ipv6_is_keyed_by_its_prefix_and_mapped_ipv4_by_its_ipv4() {
        assert_eq!(ip_key(ip("2001:db8:1:2:aaaa::1"), 64), ip("2001:db8:1:2::"));
        assert_eq!(
            ip_key(ip("2001:db8:1:2:ffff:ffff:ffff:ffff"), 64),
            ip("2001:db8:1:2::")
        );
        assert_ne!(ip_key(ip("2001:db8:1:3::1"), 64), ip("2001:db8:1:2::"));
        assert_eq!(ip_key(ip("2001:db8:1:2:aaaa::1"), 48), ip("2001:db8:1::"));
        assert_eq!(ip_key(ip("2001:db8::1"), 128), ip("2001:db8::1"));
        assert_eq!(ip_key(ip("2001:db8::1"), 0), ip("::"));
        assert_eq!(ip_key(ip("2001:db8::1"), 200), ip("2001:db8::1"));
        assert_eq!(ip_key(ip("::ffff:127.0.0.1"), 64), ip("127.0.0.1"));
        assert_eq!(ip_key(ip("::ffff:192.0.2.7"), 64), ip("192.0.2.7"));
        assert_eq!(ip_key(ip("192.0.2.7"), 64), ip("192.0.2.7"));
        assert!(normalize(ip("::ffff:127.0.0.1")).is_loopback());
    }

    fn admission(configure: impl FnOnce(&mut ServerConfig)) -> Arc<Admission> {
        let mut config = ServerConfig::default();
        configure(&mut config);
        Arc::new(Admission::new(&config))
    }

    #[test]
    fn addresses_of_one_ipv6_network_share_its_limits() {
        let admission = admission(|config| config.max_connections_per_ip = 3);
        let mut held = Vec::new();
        for host in 1..=3 {
            held.push(admission.admit(ip(&format!("2001:db8::{host:x}"))).unwrap());
        }
        assert_eq!(
            admission.admit(ip("2001:db8::ffff:1234")).err(),
            Some(Refusal::PerIp(3))
        );
        // Another network is another key.
        held.push(admission.admit(ip("2001:db8:0:1::1")).unwrap());
        drop(held);
        assert_eq!(admission.open_keys(), 0, "counts leave at 0");
    }

    #[test]
    fn mapped_loopback_is_loopback_and_loopback_is_limited_by_default() {
        let admission = admission(|config| config.max_connections_per_ip = 1);
        let _held = admission.admit(ip("127.0.0.1")).unwrap();
        assert_eq!(
            admission.admit(ip("::ffff:127.0.0.1")).err(),
            Some(Refusal::PerIp(1))
        );
        let exempt = self::admission(|config| {
            config.max_connections_per_ip = 1;
            config.exempt_loopback = true;
        });
        let _held = (0..5)
            .map(|_| exempt.admit(ip("::ffff:127.0.0.1")).unwrap())
            .collect::<Vec<_>>();
    }

    #[test]
    fn a_waiting_session_lets_one_connection_of_its_address_past_the_limit() {
        let admission = admission(|config| config.max_connections_per_ip = 1);
        let address = ip("192.0.2.1");
        let mut session = admission.admit(address).unwrap();
        assert_eq!(admission.admit(address).err(), Some(Refusal::PerIp(1)));
        session.mark_waiting();
        // One past the limit, on probation; not two.
        let first = admission.admit(address).unwrap();
        assert!(first.past_address_limit() && first.key() == session.key());
        assert_eq!(admission.admit(address).err(), Some(Refusal::PerIp(1)));
        // It failed: the next may try.
        drop(first);
        let mut second = admission.admit(address).unwrap();
        assert!(second.on_probation());
        // It resumed: the session's old place goes, the new one stays.
        second.confirm();
        drop(session);
        assert!(!second.on_probation());
        assert_eq!(admission.admit(address).err(), Some(Refusal::PerIp(1)));
        // Another address's waiting session lets nothing past here.
        let mut elsewhere = admission.admit(ip("192.0.2.2")).unwrap();
        elsewhere.mark_waiting();
        assert_eq!(admission.admit(address).err(), Some(Refusal::PerIp(1)));
        drop((second, elsewhere));
        assert_eq!(admission.open_keys(), 0, "counts leave at 0");
    }

    #[test]
    fn a_waiting_session_lets_one_connection_past_the_servers_limit() {
        let admission = admission(|config| config.max_connections = 1);
        let mut session = admission.admit(ip("192.0.2.1")).unwrap();
        assert_eq!(
            admission.admit(ip("192.0.2.2")).err(),
            Some(Refusal::Total(1))
        );
        session.mark_waiting();
        // One past the limit, from any address, on probation; not two.
        let mut first = admission.admit(ip("192.0.2.2")).unwrap();
        assert!(first.on_probation() && !first.past_address_limit());
        assert_eq!(
            admission.admit(ip("192.0.2.3")).err(),
            Some(Refusal::Total(1))
        );
        // It resumed: the session's old place goes, the new one stays.
        first.confirm();
        drop(session);
        assert!(!first.on_probation());
        assert_eq!(
            admission.admit(ip("192.0.2.3")).err(),
            Some(Refusal::Total(1))
        );
        drop(first);
        assert_eq!(admission.total.load(Ordering::Acquire), 0);
        assert_eq!(admission.waiting.load(Ordering::Acquire), 0);
        assert_eq!(admission.probation.load(Ordering::Acquire), 0);
        // A probation that failed gives its slot back.
        let mut session = admission.admit(ip("192.0.2.1")).unwrap();
        session.mark_waiting();
        drop(admission.admit(ip("192.0.2.2")).unwrap());
        assert!(admission.admit(ip("192.0.2.2")).unwrap().on_probation());
    }

    #[test]
    fn a_connection_past_both_limits_is_counted_past_both_until_it_resumes() {
        let admission = admission(|config| {
            config.max_connections = 1;
            config.max_connections_per_ip = 1;
        });
        let address = ip("192.0.2.1");
        let mut session = admission.admit(address).unwrap();
        session.mark_waiting();
        let mut past = admission.admit(address).unwrap();
        assert!(past.past_address_limit() && past.past_total);
        // No second one past the total.
        assert_eq!(
            admission.admit(ip("192.0.2.2")).err(),
            Some(Refusal::Total(1))
        );
        past.confirm();
        drop(session);
        assert!(!past.on_probation());
        assert_eq!(admission.admit(address).err(), Some(Refusal::Total(1)));
        drop(past);
        assert_eq!(admission.total.load(Ordering::Acquire), 0);
        assert_eq!(admission.probation.load(Ordering::Acquire), 0);
        assert_eq!(admission.waiting.load(Ordering::Acquire), 0);
        assert_eq!(admission.open_keys(), 0);
    }

    #[test]
    fn a_connection_past_the_total_refused_at_its_addresss_door_gives_its_slot_back() {
        let admission = admission(|config| {
            config.max_connections = 1;
            config.accepts_per_ip = 1;
        });
        let mut session = admission.admit(ip("192.0.2.1")).unwrap();
        session.mark_waiting();
        // The address's second accept in the window: refused by its rate.
        assert_eq!(
            admission.admit(ip("192.0.2.1")).err(),
            Some(Refusal::Rate(1))
        );
        assert_eq!(admission.probation.load(Ordering::Acquire), 0);
        // So another may come past the limit.
        assert!(admission.admit(ip("192.0.2.2")).unwrap().on_probation());
    }

    #[test]
    fn the_accept_rate_allows_a_burst_then_refills() {
        let admission = admission(|config| {
            config.accepts_per_ip = 4;
            config.accept_window = Duration::from_millis(400);
        });
        for _ in 0..4 {
            drop(admission.admit(ip("192.0.2.1")).unwrap());
        }
        assert_eq!(
            admission.admit(ip("192.0.2.1")).err(),
            Some(Refusal::Rate(4))
        );
        // Others are not affected.
        drop(admission.admit(ip("192.0.2.2")).unwrap());
        // One accept comes back every 100 ms; wait widely.
        let deadline = Instant::now() + Duration::from_secs(5);
        while admission.admit(ip("192.0.2.1")).is_err() {
            assert!(Instant::now() < deadline, "the rate never refilled");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn expired_rate_states_are_pruned_shard_by_shard() {
        let admission = admission(|config| {
            config.accepts_per_ip = 1;
            config.accept_window = Duration::from_millis(1);
        });
        for host in 0..1000u32 {
            let address = IpAddr::V4((0xC000_0000 | host).into());
            drop(admission.admit(address).unwrap());
        }
        assert!(admission.rate_states() > 0);
        // Every shard is visited once per SHARDS prunes; admits drive them.
        let deadline = Instant::now() + Duration::from_secs(20);
        while admission.rate_states() > 1 {
            assert!(Instant::now() < deadline, "states were never pruned");
            std::thread::sleep(Duration::from_millis(PRUNE_EVERY_MS / 2));
            drop(admission.admit(ip("198.51.100.1")));
        }
    }

    #[test]
    fn the_pending_cap_holds() {
        let admission = admission(|config| config.max_pending_upgrades = 2);
        let first = admission.begin_pending().unwrap();
        let _second = admission.begin_pending().unwrap();
        assert_eq!(admission.begin_pending().err(), Some(Refusal::Pending(2)));
        drop(first);
        assert!(admission.begin_pending().is_ok());
    }
}
