//! The address ranges Services draw from — `--service-cluster-ip-range`
//! and `--service-node-port-range` — and the allocation bitmaps over them,
//! as Kubernetes keeps them (`pkg/registry/core/service/ipallocator`,
//! `portallocator`, `allocator`): pure values, no I/O; `services.rs`
//! stores them.
//!
//! A range's bitmap is stored as Kubernetes stores its `RangeAllocation`:
//! the bits as a big-endian integer without leading zero bytes (Go's
//! `big.Int.Bytes()`), bit `i` for offset `i`.

use std::net::IpAddr;

/// Why an address or port could not be had; the texts are Kubernetes'.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AllocError {
    /// Nothing left.
    #[error("range is full")]
    Full,
    /// The IP asked for is taken.
    #[error("provided IP is already allocated")]
    IpAllocated,
    /// The port asked for is taken.
    #[error("provided port is already allocated")]
    PortAllocated,
    /// The IP asked for is outside the range.
    #[error("the provided IP ({ip}) is not in the valid range. The range of valid IPs is {range}")]
    IpNotInRange {
        /// The IP.
        ip: String,
        /// The range (`10.0.0.0/24`).
        range: String,
    },
    /// The port asked for is outside the range.
    #[error("provided port is not in the valid range. The range of valid ports is {0}")]
    PortNotInRange(String),
}

/// A set of offsets in a range of `size`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bitmap {
    words: Vec<u64>,
    size: usize,
}

impl Bitmap {
    pub(crate) fn new(size: usize) -> Bitmap {
        Bitmap { words: vec![0; size.div_ceil(64)], size }
    }

    pub(crate) fn has(&self, i: usize) -> bool {
        i < self.size && self.words[i / 64] & (1 << (i % 64)) != 0
    }

    /// Sets bit `i`; false when it was set already.
    pub(crate) fn set(&mut self, i: usize) -> bool {
        if i >= self.size || self.has(i) {
            return false;
        }
        self.words[i / 64] |= 1 << (i % 64);
        true
    }

    pub(crate) fn clear(&mut self, i: usize) {
        if i < self.size {
            self.words[i / 64] &= !(1 << (i % 64));
        }
    }

    /// The offsets set, in order.
    pub(crate) fn ones(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.size).filter(|i| self.has(*i))
    }

    #[cfg(test)]
    pub(crate) fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// A free offset, as Kubernetes' `randomScanStrategyWithOffset` picks
    /// one: a random start in `[band, size)`, scanning up and around that
    /// band; then the same in `[0, band)`. The lower band is kept for
    /// addresses asked for by number (`ServiceIPStaticSubrange`), so a
    /// dynamic allocation does not take the one a manifest names.
    pub(crate) fn next_free(&self, band: usize, rng: &mut fastrand::Rng) -> Option<usize> {
        let band = band.min(self.size);
        for (lo, hi) in [(band, self.size), (0, band)] {
            if lo >= hi {
                continue;
            }
            let start = rng.usize(lo..hi);
            if let Some(i) = (start..hi).chain(lo..start).find(|i| !self.has(*i)) {
                return Some(i);
            }
        }
        None
    }

    /// The bits as Go's `big.Int.Bytes()`: big-endian, leading zeros dropped.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut out: Vec<u8> = self.words.iter().rev().flat_map(|w| w.to_be_bytes()).collect();
        let lead = out.iter().take_while(|b| **b == 0).count();
        out.drain(..lead);
        out
    }

    /// The bitmap of `bytes` (bits beyond `size` are dropped).
    pub(crate) fn from_bytes(size: usize, bytes: &[u8]) -> Bitmap {
        let mut b = Bitmap::new(size);
        for (k, byte) in bytes.iter().rev().enumerate() {
            for bit in 0..8 {
                if byte & (1 << bit) != 0 {
                    b.set(k * 8 + bit);
                }
            }
        }
        b
    }
}

/// A Service ClusterIP range: the network's first address and (IPv4) its
/// broadcast address are never handed out; an IPv6 range is capped at
/// 65,536 addresses, as Kubernetes caps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceIpRange {
    network: u128,
    prefix: u8,
    v6: bool,
    /// Usable addresses: offset 0 is the network address + 1.
    size: usize,
}

impl ServiceIpRange {
    /// Parses a CIDR (`10.0.0.0/24`), refusing ranges larger than 2^20
    /// addresses as kube-apiserver refuses them.
    pub fn parse(cidr: &str) -> Result<ServiceIpRange, String> {
        let (ip, prefix) = cidr.split_once('/').ok_or_else(|| format!("{cidr:?} is not a CIDR (10.0.0.0/24)"))?;
        let ip: IpAddr = ip.parse().map_err(|_| format!("{cidr:?} is not a CIDR (10.0.0.0/24)"))?;
        let prefix: u8 = prefix.parse().map_err(|_| format!("{cidr:?} is not a CIDR (10.0.0.0/24)"))?;
        let (bits, value, v6) = match ip {
            IpAddr::V4(a) => (32u8, u128::from(u32::from(a)), false),
            IpAddr::V6(a) => (128u8, u128::from(a), true),
        };
        if prefix > bits {
            return Err(format!("{cidr:?} is not a CIDR (10.0.0.0/24)"));
        }
        let host_bits = bits - prefix;
        if host_bits > 20 {
            return Err(format!(
                "specified service cluster IP range {cidr} is too large; for {bits}-bit addresses, the mask must be >= {}",
                bits - 20
            ));
        }
        let total: u128 = 1 << host_bits;
        let network = value & !(total - 1);
        let mut size = if v6 { total.min(65_536) } else { total.saturating_sub(1) };
        size = size.saturating_sub(1);
        let size = usize::try_from(size).unwrap_or(0);
        Ok(ServiceIpRange { network, prefix, v6, size })
    }

    /// The range as written (`10.0.0.0/24`).
    pub fn cidr(&self) -> String {
        format!("{}/{}", self.ip(self.network), self.prefix)
    }

    /// `IPv4` or `IPv6`.
    pub fn family(&self) -> &'static str {
        if self.v6 { "IPv6" } else { "IPv4" }
    }

    pub(crate) fn size(&self) -> usize {
        self.size
    }

    fn ip(&self, v: u128) -> IpAddr {
        if self.v6 { IpAddr::V6(v.into()) } else { IpAddr::V4(u32::try_from(v).unwrap_or_default().into()) }
    }

    /// The address at `offset` (offset 0: the first usable address, the
    /// `kubernetes` Service's).
    pub fn at(&self, offset: usize) -> String {
        self.ip(self.network + 1 + offset as u128).to_string()
    }

    /// The offset of `ip`, or why it cannot be allocated.
    pub(crate) fn offset(&self, ip: &str) -> Result<usize, AllocError> {
        let not_in = || AllocError::IpNotInRange { ip: ip.to_string(), range: self.cidr() };
        let v = match ip.parse::<IpAddr>().map_err(|_| not_in())? {
            IpAddr::V4(a) if !self.v6 => u128::from(u32::from(a)),
            IpAddr::V6(a) if self.v6 => u128::from(a),
            _ => return Err(not_in()),
        };
        let off = v.checked_sub(self.network + 1).ok_or_else(not_in)?;
        usize::try_from(off).ok().filter(|o| *o < self.size).ok_or_else(not_in)
    }

    /// The lower band kept for addresses asked for by number:
    /// `min(max(16, size/16), 256)` of the range's addresses, none when it
    /// has 16 or fewer (Kubernetes' `calculateRangeOffset`).
    pub(crate) fn static_band(&self) -> usize {
        let total = self.size + if self.v6 { 1 } else { 2 };
        if total <= 16 { 0 } else { (total / 16).clamp(16, 256) }
    }
}

impl Default for ServiceIpRange {
    /// kube-apiserver's default, `10.0.0.0/24`.
    fn default() -> Self {
        ServiceIpRange { network: 0x0a00_0000, prefix: 24, v6: false, size: 254 }
    }
}

/// A NodePort range (`30000-32767`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodePortRange {
    base: u16,
    size: usize,
}

impl NodePortRange {
    /// Parses `30000-32767` (or a single port, or `30000+767`, as Kubernetes' `PortRange` does).
    pub fn parse(s: &str) -> Result<NodePortRange, String> {
        let bad = || format!("{s:?} is not a port range (30000-32767)");
        let port = |p: &str| p.trim().parse::<u16>().ok().filter(|p| *p > 0);
        let (base, last) = if let Some((a, b)) = s.split_once('-') {
            (port(a).ok_or_else(bad)?, port(b).ok_or_else(bad)?)
        } else if let Some((a, n)) = s.split_once('+') {
            let a = port(a).ok_or_else(bad)?;
            let n: u16 = n.trim().parse().map_err(|_| bad())?;
            (a, a.checked_add(n).ok_or_else(bad)?)
        } else {
            let a = port(s).ok_or_else(bad)?;
            (a, a)
        };
        if last < base {
            return Err(bad());
        }
        Ok(NodePortRange { base, size: usize::from(last - base) + 1 })
    }

    /// `30000-32767`.
    pub fn text(&self) -> String {
        format!("{}-{}", self.base, self.base as usize + self.size - 1)
    }

    pub(crate) fn size(&self) -> usize {
        self.size
    }

    pub(crate) fn at(&self, offset: usize) -> i64 {
        i64::from(self.base) + offset as i64
    }

    pub(crate) fn offset(&self, port: i64) -> Result<usize, AllocError> {
        usize::try_from(port - i64::from(self.base))
            .ok()
            .filter(|o| *o < self.size)
            .ok_or_else(|| AllocError::PortNotInRange(self.text()))
    }

    /// `min(max(16, size/32), 128)` (Kubernetes' node port `calculateRangeOffset`).
    pub(crate) fn static_band(&self) -> usize {
        if self.size <= 16 { 0 } else { (self.size / 32).clamp(16, 128) }
    }
}

impl Default for NodePortRange {
    fn default() -> Self {
        NodePortRange { base: 30000, size: 2768 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_ranges_leave_out_the_network_and_broadcast_addresses() {
        let r = ServiceIpRange::parse("10.0.0.0/24").expect("range");
        assert_eq!(r, ServiceIpRange::default());
        assert_eq!(
            (r.size(), r.at(0), r.at(253), r.cidr(), r.family()),
            (254, "10.0.0.1".into(), "10.0.0.254".into(), "10.0.0.0/24".into(), "IPv4")
        );
        assert_eq!(r.offset("10.0.0.1"), Ok(0));
        assert_eq!(r.offset("10.0.0.254"), Ok(253));
        for bad in ["10.0.0.0", "10.0.0.255", "10.0.1.1", "fd00::1", "10.0.0.300"] {
            assert_eq!(
                r.offset(bad).map_err(|e| e.to_string()),
                Err(format!(
                    "the provided IP ({bad}) is not in the valid range. The range of valid IPs is 10.0.0.0/24"
                ))
            );
        }
        assert_eq!(r.static_band(), 16);
        // kube-apiserver's largest: a /12 (2^20 addresses); its static band is capped at 256.
        let big = ServiceIpRange::parse("10.96.0.0/12").expect("/12");
        assert_eq!(
            (big.size(), big.at(0), big.at(big.size() - 1)),
            ((1 << 20) - 2, "10.96.0.1".into(), "10.111.255.254".into())
        );
        assert_eq!(big.offset("10.100.3.4"), Ok((4 << 16) + (3 << 8) + 4 - 1));
        assert_eq!(big.static_band(), 256);
        assert!(ServiceIpRange::parse("10.0.0.0/11").expect_err("too large").contains("the mask must be >= 12"));
        // Host bits are cleared as Go's ParseCIDR clears them.
        assert_eq!(ServiceIpRange::parse("10.0.0.7/30").expect("/30").cidr(), "10.0.0.4/30");
        for bad in ["10.0.0.0", "10.0.0.0/33", "x/24", "10.0.0.0/x"] {
            assert!(ServiceIpRange::parse(bad).is_err(), "{bad}");
        }
        let six = ServiceIpRange::parse("fd00::/108").expect("v6");
        assert_eq!((six.size(), six.at(0), six.family()), (65_535, "fd00::1".into(), "IPv6"));
    }

    #[test]
    fn a_small_range_fills_up_and_frees() {
        let r = ServiceIpRange::parse("10.0.0.0/30").expect("/30");
        assert_eq!((r.size(), r.static_band()), (2, 0));
        let mut b = Bitmap::new(r.size());
        let mut rng = fastrand::Rng::with_seed(7);
        let first = b.next_free(r.static_band(), &mut rng).expect("one");
        assert!(b.set(first));
        let second = b.next_free(r.static_band(), &mut rng).expect("two");
        assert!(b.set(second) && first != second);
        assert_eq!(b.next_free(r.static_band(), &mut rng), None, "full");
        assert!(!b.set(first), "taken");
        b.clear(first);
        assert_eq!(b.next_free(r.static_band(), &mut rng), Some(first));
    }

    #[test]
    fn dynamic_allocation_keeps_out_of_the_static_band_until_the_rest_is_full() {
        let r = ServiceIpRange::parse("10.0.0.0/24").expect("range");
        let mut b = Bitmap::new(r.size());
        let mut rng = fastrand::Rng::with_seed(1);
        for _ in 0..(r.size() - r.static_band()) {
            let i = b.next_free(r.static_band(), &mut rng).expect("free");
            assert!(i >= r.static_band());
            b.set(i);
        }
        let i = b.next_free(r.static_band(), &mut rng).expect("lower band");
        assert!(i < r.static_band());
    }

    #[test]
    fn bitmaps_round_trip_as_go_big_int_bytes() {
        let mut b = Bitmap::new(300);
        assert!(b.to_bytes().is_empty());
        b.set(0);
        assert_eq!(b.to_bytes(), [1]);
        b.set(9);
        assert_eq!(b.to_bytes(), [2, 1]);
        b.set(299);
        let back = Bitmap::from_bytes(300, &b.to_bytes());
        assert_eq!(back, b);
        assert_eq!(back.ones().collect::<Vec<_>>(), [0, 9, 299]);
        assert_eq!(back.count(), 3);
        // A stored bitmap of a larger range keeps only what fits.
        assert_eq!(Bitmap::from_bytes(4, &[0xff]).count(), 4);
    }

    #[test]
    fn node_port_ranges() {
        let r = NodePortRange::parse("30000-32767").expect("range");
        assert_eq!((r, r.text(), r.static_band()), (NodePortRange::default(), "30000-32767".to_string(), 86));
        assert_eq!((r.offset(30000), r.offset(32767), r.at(5)), (Ok(0), Ok(2767), 30005));
        assert_eq!(
            r.offset(29999).map_err(|e| e.to_string()),
            Err("provided port is not in the valid range. The range of valid ports is 30000-32767".to_string())
        );
        assert_eq!(NodePortRange::parse("30000+9").expect("plus").text(), "30000-30009");
        assert_eq!(NodePortRange::parse("30000").expect("one").size(), 1);
        for bad in ["", "a-b", "32767-30000", "0-10", "70000-80000"] {
            assert!(NodePortRange::parse(bad).is_err(), "{bad}");
        }
    }
}
