//! Who a request comes from, for limits keyed on the client: the TCP peer,
//! or, when the peer is a trusted proxy (`limits.trusted_proxies`, e.g. the
//! HAProxy in front of a cluster), the address that proxy put in
//! `X-Forwarded-For`. Only the proxies' own entries are trusted: the list
//! is read from the right and the first address that is not a trusted
//! proxy is the client, so a client cannot choose its address by sending
//! the header itself.

use std::net::IpAddr;

use http::HeaderMap;
use ipnet::IpNet;

/// The proxies whose `X-Forwarded-For` is believed.
#[derive(Clone, Debug, Default)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// Parses addresses and CIDR blocks (`127.0.0.1`, `10.0.0.0/8`, `::1`).
    pub fn parse(items: &[String]) -> Result<Self, String> {
        items
            .iter()
            .map(|s| {
                let s = s.trim();
                s.parse::<IpNet>()
                    .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| format!("not an address or CIDR block: {s}"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(TrustedProxies)
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.0.iter().any(|n| n.contains(&ip))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The client's address for a request that reached us from `peer`.
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = canonical(peer);
        if !self.contains(peer) {
            return peer;
        }
        let mut client = peer;
        // Several X-Forwarded-For headers count as one list, in order.
        let hops: Vec<&str> =
            headers.get_all("x-forwarded-for").iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).collect();
        for hop in hops.iter().rev() {
            let Ok(ip) = hop.trim().parse::<IpAddr>() else { break };
            client = canonical(ip);
            if !self.contains(client) {
                break;
            }
        }
        client
    }
}

/// IPv4-mapped IPv6 addresses as the IPv4 address they are.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(xff: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in xff {
            h.append("x-forwarded-for", v.parse().unwrap());
        }
        h
    }

    #[test]
    fn the_header_counts_only_from_a_trusted_proxy_and_only_its_own_entry() {
        let t = TrustedProxies::parse(&["127.0.0.1".into(), "10.0.0.0/8".into()]).unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // Not through a proxy: the header is the client's own words.
        assert_eq!(t.client_ip(ip("192.0.2.7"), &headers(&["1.2.3.4"])), ip("192.0.2.7"));
        // Through the proxy: its entry (the last) is the client.
        assert_eq!(t.client_ip(ip("127.0.0.1"), &headers(&["1.2.3.4"])), ip("1.2.3.4"));
        // A forged entry before the proxy's own is ignored.
        assert_eq!(t.client_ip(ip("127.0.0.1"), &headers(&["6.6.6.6, 1.2.3.4"])), ip("1.2.3.4"));
        assert_eq!(t.client_ip(ip("127.0.0.1"), &headers(&["6.6.6.6", "1.2.3.4"])), ip("1.2.3.4"));
        // Chained trusted proxies are skipped.
        assert_eq!(t.client_ip(ip("127.0.0.1"), &headers(&["1.2.3.4, 10.1.1.1"])), ip("1.2.3.4"));
        // Garbage stops the walk at the last good address.
        assert_eq!(t.client_ip(ip("127.0.0.1"), &headers(&["nonsense"])), ip("127.0.0.1"));
        // No header: the proxy itself.
        assert_eq!(t.client_ip(ip("127.0.0.1"), &headers(&[])), ip("127.0.0.1"));
        // IPv4-mapped peers are their IPv4 address.
        assert_eq!(t.client_ip(ip("::ffff:127.0.0.1"), &headers(&["1.2.3.4"])), ip("1.2.3.4"));
        assert!(TrustedProxies::parse(&["nope".into()]).is_err());
        assert!(TrustedProxies::default().client_ip(ip("127.0.0.1"), &headers(&["1.2.3.4"])) == ip("127.0.0.1"));
    }
}
