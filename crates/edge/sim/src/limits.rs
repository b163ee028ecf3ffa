//! The system limits a fleet runs into, checked before it starts, so that
//! a run that cannot work says which limit stops it instead of failing
//! obscurely halfway (connections refused, `EMFILE`, the OOM killer).

use std::net::IpAddr;

use edgehive_edgehub::Transport;
use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// Descriptors the process needs besides its links (runtime, files, API).
const SPARE_FDS: u64 = 256;
/// Memory a simulated node takes at most (the target), for the estimate.
pub const NODE_BYTES: u64 = 50 * 1024;

/// What the checks found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The open-file limit after raising the soft limit to the hard one.
    pub nofile: u64,
    /// `net.core.somaxconn`.
    pub somaxconn: Option<u64>,
    /// Ephemeral ports per local address.
    pub ephemeral_ports: Option<u64>,
    /// Available memory, bytes.
    pub available_memory: Option<u64>,
    /// Warnings: the run may work, but this may show in its figures.
    pub warnings: Vec<String>,
}

fn read_u64s(path: &str) -> Option<Vec<u64>> {
    let text = std::fs::read_to_string(path).ok()?;
    text.split_whitespace().map(|v| v.parse().ok()).collect()
}

fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = text.lines().find(|l| l.starts_with("MemAvailable:"))?.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Raises this process's open-file limit as far as it may go and checks
/// that `nodes` links over `transport` from `sources` (empty: one) fit the
/// descriptors, the ephemeral ports and the memory. An error names the
/// limit and what to do about it.
pub fn check(nodes: usize, transport: Transport, sources: &[IpAddr]) -> Result<Limits, String> {
    let nodes = nodes as u64;
    let now = getrlimit(Resource::Nofile);
    let hard = now.maximum.unwrap_or(u64::MAX);
    if now.current.is_some_and(|c| c < hard) {
        let _ = setrlimit(Resource::Nofile, Rlimit { current: Some(hard), maximum: now.maximum });
    }
    let nofile = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    let mut limits = Limits {
        nofile,
        somaxconn: read_u64s("/proc/sys/net/core/somaxconn").and_then(|v| v.first().copied()),
        ephemeral_ports: read_u64s("/proc/sys/net/ipv4/ip_local_port_range")
            .filter(|v| v.len() == 2)
            .map(|v| v[1].saturating_sub(v[0]) + 1),
        available_memory: mem_available(),
        warnings: Vec::new(),
    };
    if transport == Transport::WebSocket {
        let need = nodes + SPARE_FDS;
        if need > nofile {
            return Err(format!(
                "the open-file limit (nofile) is {nofile} and cannot be raised further here (hard limit {hard}); \
                 {nodes} WebSocket links need about {need} descriptors. Raise the hard limit (`ulimit -Hn`, \
                 systemd's LimitNOFILE, /etc/security/limits.conf), run fewer nodes per process, or use \
                 --transport quic, whose links share a few UDP sockets. The cloud needs as many descriptors \
                 for the same links."
            ));
        }
        if let Some(ports) = limits.ephemeral_ports {
            let addresses = sources.len().max(1) as u64;
            // A few ports stay free for other connections of the machine.
            let usable = ports.saturating_sub(ports / 16);
            if nodes > usable * addresses {
                let need = nodes.div_ceil(usable.max(1));
                return Err(format!(
                    "{nodes} links to one server need {need} local addresses: each has {ports} ephemeral ports \
                     (net.ipv4.ip_local_port_range) and {addresses} given; use --sources 127.0.0.2-127.0.0.{}",
                    need + 1
                ));
            }
        }
    }
    if let Some(avail) = limits.available_memory {
        let want = nodes * NODE_BYTES;
        if want > avail {
            return Err(format!(
                "{nodes} simulated nodes need about {} MiB and {} MiB are available (MemAvailable); the cloud \
                 needs memory too: run fewer nodes",
                want >> 20,
                avail >> 20
            ));
        }
    }
    if let Some(backlog) = limits.somaxconn
        && nodes > backlog
    {
        limits.warnings.push(format!(
            "net.core.somaxconn is {backlog}: a cloud on this machine queues at most that many connections \
             waiting to be accepted, so in a storm of {nodes} reconnections some SYNs are dropped and retried \
             after 1 s (raise it with sysctl to see the cloud's own limit)"
        ));
    }
    Ok(limits)
}

/// `127.0.0.2-127.0.0.9` or `127.0.0.1,127.0.0.2` as a list of addresses.
pub fn parse_sources(text: &str) -> Result<Vec<IpAddr>, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (std::net::Ipv4Addr, std::net::Ipv4Addr) = (
                    a.trim().parse().map_err(|e| format!("{a:?}: {e}"))?,
                    b.trim().parse().map_err(|e| format!("{b:?}: {e}"))?,
                );
                let (a, b) = (u32::from(a), u32::from(b));
                if b < a || b - a > 65_535 {
                    return Err(format!("{part:?} is not a range of at most 65,536 addresses"));
                }
                out.extend((a..=b).map(|ip| IpAddr::from(std::net::Ipv4Addr::from(ip))));
            }
            None => out.push(part.parse().map_err(|e| format!("{part:?}: {e}"))?),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_ranges_expand_and_bad_ones_are_refused() {
        let v = parse_sources("127.0.0.2-127.0.0.4, 127.0.0.9").unwrap();
        assert_eq!(v.len(), 4);
        assert_eq!(v[0], IpAddr::from([127, 0, 0, 2]));
        assert_eq!(v[3], IpAddr::from([127, 0, 0, 9]));
        assert!(parse_sources("127.0.0.4-127.0.0.2").is_err());
        assert!(parse_sources("127.0.0.x").is_err());
    }

    #[test]
    fn a_fleet_over_the_descriptor_limit_is_refused_with_the_limit_named() {
        let err = check(usize::MAX / 4, Transport::WebSocket, &[]).unwrap_err();
        assert!(err.contains("nofile"), "{err}");
        // QUIC links share sockets: only memory bounds them.
        let err = check(1 << 40, Transport::Quic, &[]).unwrap_err();
        assert!(err.contains("MemAvailable"), "{err}");
        assert!(check(10, Transport::WebSocket, &[]).is_ok());
    }
}
