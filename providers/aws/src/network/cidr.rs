//! IPv4 CIDR blocks: the arithmetic of the Go operator's standalone network
//! (cluster_network_provider.go: `getNonOverlappingDefaultCIDR`,
//! `validateStandaloneCidrBlock`, `reconcileStandaloneVPCSubnets`).

use std::{fmt, net::Ipv4Addr, str::FromStr};

/// An IPv4 block, its address masked to its prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cidr {
    base: u32,
    prefix: u8,
}

impl Cidr {
    fn new(addr: u32, prefix: u8) -> Cidr {
        Cidr {
            base: addr & mask(prefix),
            prefix,
        }
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    fn last(&self) -> u32 {
        self.base | !mask(self.prefix)
    }

    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.base <= other.last() && other.base <= self.last()
    }

    /// The two halves, lower first (a /26 gives two /27s).
    pub fn halves(&self) -> Option<[Cidr; 2]> {
        (self.prefix < 32).then(|| {
            let prefix = self.prefix + 1;
            [
                Cidr::new(self.base, prefix),
                Cidr::new(self.base | (1 << (32 - prefix)), prefix),
            ]
        })
    }
}

fn mask(prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix))
    }
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || format!("{s:?} is not an IPv4 CIDR block such as \"10.1.0.0/26\"");
        let (addr, prefix) = s.trim().split_once('/').ok_or_else(invalid)?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| invalid())?;
        let prefix: u8 = prefix.parse().map_err(|_| invalid())?;
        if prefix > 32 {
            return Err(invalid());
        }
        Ok(Cidr::new(u32::from(addr), prefix))
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.base), self.prefix)
    }
}

/// The first of the Go operator's default blocks that overlaps none of
/// `taken`: 10.0.0.0/26, 10.1.0.0/26, … 10.255.0.0/26, then 172.16.0.0/26
/// … 172.31.0.0/26.
pub fn default_block(taken: &[Cidr]) -> Option<Cidr> {
    let tens = (0..=255u32).map(|b| (10u32 << 24) | (b << 16));
    let one_seventy_twos = (16..=31u32).map(|b| (172u32 << 24) | (b << 16));
    tens.chain(one_seventy_twos)
        .map(|base| Cidr::new(base, 26))
        .find(|c| !taken.iter().any(|t| t.overlaps(c)))
}

/// A standalone block must be /16 to /26 and clear of the cluster's
/// blocks; the error names the `_network` strategy to change.
pub fn check_standalone(block: &Cidr, cluster: &[Cidr]) -> Result<(), BlockError> {
    if !(16..=26).contains(&block.prefix) {
        return Err(BlockError::Size(*block));
    }
    if let Some(c) = cluster.iter().find(|c| c.overlaps(block)) {
        return Err(BlockError::Overlaps(*block, *c));
    }
    Ok(())
}

/// Why a standalone block cannot be used.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum BlockError {
    #[error(
        "_network CidrBlock {0} is out of range: block sizes must be between /16 and /26; change it in the tier's _network createStrategy (cloud-resources-aws-strategies)"
    )]
    Size(Cidr),
    #[error(
        "_network CidrBlock {0} overlaps the cluster VPC's {1}: choose a block outside it in the tier's _network createStrategy (cloud-resources-aws-strategies)"
    )]
    Overlaps(Cidr, Cidr),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> Cidr {
        s.parse().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn halves_split_the_block_lower_first() {
        assert_eq!(
            c("10.1.0.0/26").halves(),
            Some([c("10.1.0.0/27"), c("10.1.0.32/27")])
        );
        assert_eq!(c("10.1.0.7/26").to_string(), "10.1.0.0/26");
    }

    #[test]
    fn the_default_skips_blocks_the_cluster_uses() {
        assert_eq!(default_block(&[]), Some(c("10.0.0.0/26")));
        assert_eq!(
            default_block(&[c("10.0.0.0/16"), c("10.1.0.0/24")]),
            Some(c("10.2.0.0/26"))
        );
        assert_eq!(default_block(&[c("10.0.0.0/8")]), Some(c("172.16.0.0/26")));
        assert_eq!(default_block(&[c("0.0.0.0/0")]), None);
    }

    #[test]
    fn a_standalone_block_is_sized_and_clear_of_the_cluster() {
        let cluster = [c("10.0.0.0/16")];
        assert!(check_standalone(&c("10.1.0.0/26"), &cluster).is_ok());
        let e = check_standalone(&c("10.0.128.0/26"), &cluster).err();
        assert!(e.is_some_and(|e| {
            e.to_string()
                .contains("overlaps the cluster VPC's 10.0.0.0/16")
        }));
        let e = check_standalone(&c("10.1.0.0/28"), &cluster).err();
        assert!(e.is_some_and(|e| e.to_string().contains("between /16 and /26")));
        assert!("10.1.0.0".parse::<Cidr>().is_err());
        assert!("10.1.0.0/33".parse::<Cidr>().is_err());
    }
}
