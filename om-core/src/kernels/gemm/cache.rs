//! The data caches of the CPU, read once at run time for the GEMM's blocking: CPUID's
//! deterministic cache parameters on x86-64 (leaf 4 on Intel, 0x8000001D on AMD), else
//! Linux's `/sys/devices/system/cpu/cpu0/cache`, else a conservative default (32 KiB 8-way
//! L1, 1 MiB 8-way L2). The values only shape the blocking, never the order of the
//! arithmetic, so results do not depend on them.

use std::sync::OnceLock;

/// One cache level's geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Level {
    /// Bytes.
    pub size: usize,
    /// Ways of associativity.
    pub ways: usize,
    /// Bytes per line.
    pub line: usize,
}

impl Level {
    /// Number of sets (`size / (ways · line)`, at least 1).
    pub fn sets(&self) -> usize {
        (self.size / (self.ways * self.line)).max(1)
    }

    /// A level whose numbers are plausible (guards against a VM reporting zeros).
    fn plausible(self) -> Option<Level> {
        let ok = self.size >= 4096 && self.ways >= 1 && self.line.is_power_of_two() && (16..=256).contains(&self.line);
        ok.then_some(self)
    }
}

/// The L1 data and L2 caches of the CPU the process runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Caches {
    pub l1: Level,
    pub l2: Level,
}

/// Used when neither CPUID nor sysfs tells: the smaller of the usual current x86 values.
const FALLBACK: Caches = Caches { l1: Level { size: 32 << 10, ways: 8, line: 64 }, l2: Level { size: 1 << 20, ways: 8, line: 64 } };

/// The caches, detected on first use.
pub(crate) fn caches() -> Caches {
    static CACHES: OnceLock<Caches> = OnceLock::new();
    *CACHES.get_or_init(|| detect().unwrap_or(FALLBACK))
}

fn detect() -> Option<Caches> {
    let from = |levels: Vec<(usize, Level)>| {
        let find = |want| levels.iter().find(|(l, _)| *l == want).and_then(|(_, c)| c.plausible());
        Some(Caches { l1: find(1)?, l2: find(2)? })
    };
    cpuid_levels().and_then(from).or_else(|| sysfs_levels().and_then(from))
}

/// Data or unified caches by level from CPUID's deterministic cache parameters.
#[cfg(target_arch = "x86_64")]
fn cpuid_levels() -> Option<Vec<(usize, Level)>> {
    use std::arch::x86_64::{__cpuid_count, CpuidResult};
    // `__cpuid_count` is a safe function in recent Rust and `unsafe` in the older releases
    // the crate supports (from 1.89).
    #[allow(unused_unsafe)]
    // SAFETY: CPUID is available on every x86-64 CPU; leaves above the reported maximum
    // are not queried.
    let cpuid = |leaf: u32, sub: u32| -> CpuidResult { unsafe { __cpuid_count(leaf, sub) } };
    let vendor = cpuid(0, 0);
    let amd = vendor.ebx == u32::from_le_bytes(*b"Auth") || vendor.ebx == u32::from_le_bytes(*b"Hygo");
    let leaf = if amd {
        // Leaf 0x8000001D needs the topology extensions (CPUID 0x80000001 ECX bit 22).
        if cpuid(0x8000_0000, 0).eax < 0x8000_001D || cpuid(0x8000_0001, 0).ecx & (1 << 22) == 0 {
            return None;
        }
        0x8000_001D
    } else {
        if vendor.eax < 4 {
            return None;
        }
        4
    };
    let mut levels = Vec::new();
    for sub in 0..16 {
        let r = cpuid(leaf, sub);
        let kind = r.eax & 0x1f; // 0 none, 1 data, 2 instruction, 3 unified
        if kind == 0 {
            break;
        }
        if kind == 2 {
            continue;
        }
        let level = ((r.eax >> 5) & 7) as usize;
        let line = (r.ebx & 0xfff) as usize + 1;
        let partitions = ((r.ebx >> 12) & 0x3ff) as usize + 1;
        let ways = ((r.ebx >> 22) & 0x3ff) as usize + 1;
        let sets = r.ecx as usize + 1;
        levels.push((level, Level { size: ways * partitions * line * sets, ways, line }));
    }
    Some(levels)
}

#[cfg(not(target_arch = "x86_64"))]
fn cpuid_levels() -> Option<Vec<(usize, Level)>> {
    None
}

/// Data or unified caches by level from `/sys/devices/system/cpu/cpu0/cache/index*`.
fn sysfs_levels() -> Option<Vec<(usize, Level)>> {
    let root = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let mut levels = Vec::new();
    for entry in std::fs::read_dir(root).ok()?.flatten() {
        let dir = entry.path();
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok().map(|s| s.trim().to_string());
        let kind = read("type").unwrap_or_default();
        if kind != "Data" && kind != "Unified" {
            continue;
        }
        let num = |name: &str| read(name).and_then(|s| s.parse::<usize>().ok());
        let size = read("size").and_then(|s| match s.strip_suffix('K') {
            Some(kib) => kib.parse::<usize>().ok().map(|v| v << 10),
            None => s.strip_suffix('M').and_then(|mib| mib.parse::<usize>().ok()).map(|v| v << 20),
        });
        if let (Some(level), Some(size), Some(ways), Some(line)) =
            (num("level"), size, num("ways_of_associativity"), num("coherency_line_size"))
        {
            levels.push((level, Level { size, ways, line }));
        }
    }
    Some(levels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detected_caches_are_plausible_and_stable() {
        let c = caches();
        assert!(c.l1.size >= 4096 && c.l2.size >= c.l1.size, "{c:?}");
        assert!(c.l1.sets() >= 1 && c.l2.sets() >= 1);
        assert_eq!(caches(), c);
    }
}
