/**
 * A fingerprint's facts by name, in words, for showing a machine in one line (`fsbench agents`)
 * and for naming what differs between the machines of a comparison: a delta measured on a
 * `performance` governor against a `powersave` one says more about the governor than about the
 * change being compared.
 */
import type { HostFacts, MachineFingerprint } from '../contract/fingerprint.js';
import { formatSize } from '../contract/units.js';

/** One fact that differs between the two sides: the baseline's value (a) and the candidate's (b); null where unknown. */
export interface DifferingFact {
  readonly fact: string;
  readonly a: string | null;
  readonly b: string | null;
}

const size = (n: number | null | undefined) => (n === null || n === undefined ? null : formatSize(n));
const onOff = (v: boolean | null) => (v === null ? null : v ? 'on' : 'off');
const num = (v: number | null | undefined) => (v === null || v === undefined ? null : String(v));

function smt(f: HostFacts): string | null {
  if (f.smtControl === null && f.smtActive === null) return null;
  if (f.smtControl === 'notsupported' || f.smtControl === 'notimplemented') return f.smtControl;
  return [f.smtControl, f.smtActive === null ? null : f.smtActive ? 'active' : 'inactive'].filter((x) => x !== null).join(', ');
}

function hypervisor(f: HostFacts): string | null {
  if (f.virtualized === false) return 'none (bare metal)';
  if (f.virtualized === true) return f.hypervisor ?? 'unnamed';
  return null;
}

function rotational(v: boolean | null | undefined): string | null {
  return v === null || v === undefined ? null : v ? 'rotational' : 'ssd';
}

/** Every fact a comparison names, in a fixed order; null values are unknown. */
export function namedFacts(fp: MachineFingerprint): [string, string | null][] {
  const f = fp.facts;
  const s = f.scratch;
  const docker = fp.container.docker;
  return [
    ['cpu', fp.cpu.model],
    ['logical cores', String(fp.cpu.logicalCores)],
    ['physical cores', num(fp.cpu.physicalCores)],
    ['L1d', size(fp.cpu.l1dBytes)],
    ['L2', size(fp.cpu.l2Bytes)],
    ['L3', size(fp.cpu.l3Bytes)],
    ['kernel', fp.kernel.release],
    ['arch', fp.kernel.arch],
    ['memory', size(fp.memoryBytes)],
    ['container', fp.container.inContainer ? (fp.container.runtime ?? 'yes') : 'none'],
    ['docker', docker ? docker.engineVersion : null],
    ['docker storage driver', docker ? docker.storageDriver : null],
    ['docker cgroup', docker?.cgroupVersion ? `v${docker.cgroupVersion}` : null],
    ['container cpu limit', docker?.self ? (docker.self.cpuLimit === null ? 'none' : String(docker.self.cpuLimit)) : null],
    ['container memory limit', docker?.self ? (docker.self.memoryLimitBytes === null ? 'none' : formatSize(docker.self.memoryLimitBytes)) : null],
    ['cpufreq driver', f.cpufreqDriver],
    ['governor', f.cpuGovernor],
    ['boost', onOff(f.cpuBoost)],
    ['SMT', smt(f)],
    ['THP', f.thpEnabled],
    ['THP defrag', f.thpDefrag],
    ['NUMA nodes', num(f.numaNodes)],
    ['hypervisor', hypervisor(f)],
    ['clocksource', f.clocksource],
    ['scratch fs', s?.fsType ?? null],
    ['scratch mount options', s ? s.mountOptions.join(',') : null],
    ['scratch device', rotational(s?.rotational)],
    ['scratch device model', s?.model ?? null],
    ['scratch scheduler', s?.scheduler ?? null],
    ['cgroup cpu limit', f.cgroupVersion === null ? null : f.cpuLimit === null ? 'none' : String(f.cpuLimit)],
    ['cgroup memory limit', f.cgroupVersion === null ? null : f.memoryLimitBytes === null ? 'none' : formatSize(f.memoryLimitBytes)],
  ];
}

/** The facts whose values differ between two fingerprints; `suffix` names the machine when sides hold several. */
export function differingFacts(a: MachineFingerprint, b: MachineFingerprint, suffix = ''): DifferingFact[] {
  const bs = new Map(namedFacts(b));
  return namedFacts(a).flatMap(([fact, va]) => {
    const vb = bs.get(fact) ?? null;
    return va === vb ? [] : [{ fact: `${fact}${suffix}`, a: va, b: vb }];
  });
}

export function differingFactText(d: DifferingFact): string {
  return `${d.fact}: ${d.a ?? 'unknown'} vs ${d.b ?? 'unknown'}`;
}

/**
 * A machine's facts in one line, the unknown ones left out: `governor performance, boost on,
 * SMT off, THP madvise, 1 NUMA node, KVM, tsc, scratch: vda ssd mq-deadline ext4`.
 */
export function factsLine(fp: MachineFingerprint): string {
  const f = fp.facts;
  const s = f.scratch;
  const parts = [
    f.cpuGovernor === null ? 'no cpufreq' : `governor ${f.cpuGovernor}`,
    f.cpuBoost === null ? null : `boost ${onOff(f.cpuBoost) ?? ''}`,
    smt(f) === null ? null : `SMT ${smt(f) ?? ''}`,
    f.thpEnabled === null ? null : `THP ${f.thpEnabled}`,
    f.numaNodes === null ? null : `${f.numaNodes} NUMA node${f.numaNodes === 1 ? '' : 's'}`,
    f.virtualized === null ? null : f.virtualized ? (f.hypervisor ?? 'VM') : 'bare metal',
    f.clocksource,
    f.cpuLimit === null ? null : `cgroup ${f.cpuLimit} CPUs`,
    f.memoryLimitBytes === null ? null : `cgroup ${formatSize(f.memoryLimitBytes)}`,
    s ? `scratch: ${[s.device, rotational(s.rotational), s.scheduler, s.fsType].filter((x) => x !== null).join(' ')}` : null,
  ];
  return parts.filter((p) => p !== null && p !== '').join(', ');
}
