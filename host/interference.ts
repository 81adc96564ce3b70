/**
 * Interference: what else the machine did while a run measured. `startInterference()` just
 * before the workload starts, `finishInterference()` just after it ends; both read a handful of
 * /proc files (one pread each, on descriptors kept open) and nothing else, so they cost well
 * under a millisecond.
 *
 * /proc/stat and /proc/pressure are host-wide even inside a container, which is the point: a
 * neighbour container's CPU hog disturbs the run as much as a process beside it. Every file is
 * parsed strictly; one that is missing or not as expected gives null fields, never a guess.
 */
import { closeSync, openSync, readFileSync, readSync } from 'node:fs';
import { FsbenchError } from '../contract/errors.js';
import { INTERFERENCE_SETTINGS, type Interference, type InterferenceFlag, type InterferenceThresholds, type PressureDelta } from '../contract/interference.js';

/**
 * /proc/stat and /proc/<pid>/stat count in USER_HZ ticks, which the kernel fixes at 100 for
 * every ABI Node runs on (the kernel's own HZ may differ; it converts).
 */
export const MS_PER_TICK = 10;

type PsiResource = 'cpu' | 'io' | 'memory';

interface HostCpu {
  /** user + nice + system + irq + softirq, in ticks. */
  readonly busyTicks: number;
  readonly stealTicks: number;
  readonly cpus: number;
  readonly ctxt: number | null;
}

/** PSI `total=` counters in microseconds. */
interface PsiTotals {
  readonly someUs: number;
  readonly fullUs: number | null;
}

export interface InterferenceSnapshot {
  readonly atMs: number;
  readonly host: HostCpu | null;
  readonly pressure: Readonly<Record<PsiResource, PsiTotals | null>>;
  readonly own: NodeJS.ResourceUsage;
  readonly childrenTicks: number | null;
}

export interface FinishOptions {
  readonly thresholds: InterferenceThresholds;
  /**
   * False when the workload ran outside this process's children (a sandbox container): its CPU
   * time would count as someone else's, so outside CPU is not reported (null) nor judged.
   */
  readonly attributable: boolean;
}

/**
 * FSBENCH_MAX_STEAL and FSBENCH_MAX_OUTSIDE_CPU as the process's environment sets them (the
 * settings' defaults when unset); CONFIG_INVALID naming the variable when malformed.
 */
export function thresholdsFromEnv(env: NodeJS.ProcessEnv = process.env): InterferenceThresholds {
  const read = (s: (typeof INTERFERENCE_SETTINGS)[keyof typeof INTERFERENCE_SETTINGS]) => {
    const raw = env[s.env] === '' ? undefined : env[s.env];
    const r = s.schema.safeParse(raw);
    if (!r.success) throw new FsbenchError('CONFIG_INVALID', `${s.env} ${JSON.stringify(raw)} is invalid: ${r.error.issues.map((i) => i.message).join('; ')}`);
    return r.data;
  };
  return { maxSteal: read(INTERFERENCE_SETTINGS.maxSteal), maxOutsideCpu: read(INTERFERENCE_SETTINGS.maxOutsideCpu) };
}

/**
 * The files a snapshot reads, each opened once (null: could not be) and read again from offset 0
 * into one reused buffer: readFileSync opens, stats, reads twice and closes every time, and those
 * reads were a sixth of an agent's busy time per no-op run. A /proc file's text is made afresh by
 * the kernel on every read from offset 0 (seq_file), so a kept descriptor reads current values;
 * Node opens it close-on-exec, so no workload or container inherits it.
 */
const procFds = new Map<string, number | null>();
/** /proc/stat grows with the CPUs and interrupt lines; a file that fills this is read whole instead. */
const procBuffer = Buffer.alloc(64 * 1024);

function readProc(file: string): string | null {
  let fd = procFds.get(file);
  if (fd === undefined) {
    try {
      fd = openSync(file, 'r');
    } catch {
      fd = null;
    }
    procFds.set(file, fd);
  }
  if (fd === null) return null;
  try {
    // These files are each one seq_file record, which one read returns whole when the buffer
    // holds it: a read shorter than the buffer is the whole file.
    const n = readSync(fd, procBuffer, 0, procBuffer.length, 0);
    return n < procBuffer.length ? procBuffer.toString('latin1', 0, n) : readFileSync(file, 'latin1');
  } catch {
    // Opened again next time: a failed read says nothing about the next one.
    procFds.delete(file);
    try {
      closeSync(fd);
    } catch {
      // Already unusable; nothing more to release.
    }
    return null;
  }
}

/** Non-negative integers, all of them, or null. */
function integers(fields: readonly string[]): number[] | null {
  const out: number[] = [];
  for (const f of fields) {
    if (!/^\d+$/.test(f)) return null;
    const n = Number(f);
    if (!Number.isSafeInteger(n)) return null;
    out.push(n);
  }
  return out;
}

/**
 * The `cpu` line's columns: user nice system idle iowait irq softirq steal [guest guest_nice].
 * Busy is user + nice + system + irq + softirq. Idle and iowait are not busy; steal is time the
 * hypervisor gave this guest's CPUs to someone else, when nothing here ran at all, so it is
 * reported apart and not counted as anyone's CPU use here; guest time is already inside user
 * and nice, so adding it would count it twice.
 */
export function parseProcStat(text: string): HostCpu | null {
  const lines = text.split('\n');
  const cpuLine = lines.find((l) => l.startsWith('cpu '));
  if (cpuLine === undefined) return null;
  const cols = integers(cpuLine.slice(4).trim().split(/\s+/));
  if (cols === null || cols.length < 8) return null;
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = cols;
  const cpus = lines.filter((l) => /^cpu\d+ /.test(l)).length;
  if (cpus === 0) return null;
  const ctxtFields = lines.find((l) => l.startsWith('ctxt '))?.split(' ');
  const ctxt = ctxtFields?.length === 2 ? (integers(ctxtFields.slice(1))?.[0] ?? null) : null;
  return { busyTicks: user + nice + system + irq + softirq, stealTicks: steal, cpus, ctxt };
}

const PSI_LINE = /^(some|full) avg10=\d+\.\d+ avg60=\d+\.\d+ avg300=\d+\.\d+ total=(\d+)$/;

/** A /proc/pressure file: `some` always, `full` where the kernel reports it. */
export function parsePressure(text: string): PsiTotals | null {
  let someUs: number | null = null;
  let fullUs: number | null = null;
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const m = PSI_LINE.exec(line);
    if (!m?.[2]) return null;
    const total = Number(m[2]);
    if (!Number.isSafeInteger(total)) return null;
    if (m[1] === 'some') someUs = total;
    else fullUs = total;
  }
  return someUs === null ? null : { someUs, fullUs };
}

/**
 * cutime + cstime of /proc/self/stat: CPU time of the children this process has waited for,
 * which is how every native probe ends (spawned, then reaped by Node when it exits). The
 * command name may hold spaces and parentheses, so fields are counted after the last `)`.
 */
export function parseChildrenTicks(text: string): number | null {
  const close = text.lastIndexOf(')');
  if (close < 0) return null;
  // Field 3 (state) is the first after the name: cutime and cstime are fields 16 and 17.
  const fields = text.slice(close + 2).trim().split(' ');
  const t = integers([fields[13] ?? '', fields[14] ?? '']);
  return t === null ? null : (t[0] ?? 0) + (t[1] ?? 0);
}

function readPressure(): Record<PsiResource, PsiTotals | null> {
  const read = (r: PsiResource) => {
    const text = readProc(`/proc/pressure/${r}`);
    return text === null ? null : parsePressure(text);
  };
  return { cpu: read('cpu'), io: read('io'), memory: read('memory') };
}

function snapshot(): InterferenceSnapshot {
  const stat = readProc('/proc/stat');
  const self = readProc('/proc/self/stat');
  return {
    host: stat === null ? null : parseProcStat(stat),
    pressure: readPressure(),
    childrenTicks: self === null ? null : parseChildrenTicks(self),
    own: process.resourceUsage(),
    atMs: performance.now(),
  };
}

/** Just before the workload starts. */
export function startInterference(): InterferenceSnapshot {
  return snapshot();
}

const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits;

/** A counter's growth; null when either end is unknown or it went backwards (never a guess). */
function delta(a: number | null | undefined, b: number | null | undefined): number | null {
  if (a === null || a === undefined || b === null || b === undefined || b < a) return null;
  return b - a;
}

function pressureDelta(a: PsiTotals | null, b: PsiTotals | null): PressureDelta | null {
  if (a === null || b === null) return null;
  const some = delta(a.someUs, b.someUs);
  if (some === null) return null;
  const full = delta(a.fullUs, b.fullUs);
  return { someMs: round(some / 1000, 3), fullMs: full === null ? null : round(full / 1000, 3) };
}

function judge(i: Pick<Interference, 'stealFraction' | 'outsideCpuFraction'>, t: InterferenceThresholds): InterferenceFlag[] {
  const flags: InterferenceFlag[] = [];
  if (i.stealFraction !== null && i.stealFraction > t.maxSteal) flags.push('steal');
  if (i.outsideCpuFraction !== null && i.outsideCpuFraction > t.maxOutsideCpu) flags.push('outsideCpu');
  return flags;
}

/** Just after the workload ends: the deltas since `start`, judged against the thresholds. */
export function finishInterference(start: InterferenceSnapshot, o: FinishOptions): Interference {
  const end = snapshot();
  const wallMs = Math.max(0, end.atMs - start.atMs);
  const cpus = end.host?.cpus ?? null;
  const stealTicks = delta(start.host?.stealTicks, end.host?.stealTicks);
  const busyTicks = delta(start.host?.busyTicks, end.host?.busyTicks);
  const childrenTicks = delta(start.childrenTicks, end.childrenTicks);
  const ownCpuMs = (end.own.userCPUTime + end.own.systemCPUTime - start.own.userCPUTime - start.own.systemCPUTime) / 1000;
  const ownCtx =
    end.own.voluntaryContextSwitches + end.own.involuntaryContextSwitches - start.own.voluntaryContextSwitches - start.own.involuntaryContextSwitches;
  const stealMs = stealTicks === null ? null : stealTicks * MS_PER_TICK;
  const hostBusyMs = busyTicks === null ? null : busyTicks * MS_PER_TICK;
  const childrenCpuMs = childrenTicks === null ? null : childrenTicks * MS_PER_TICK;
  // The host counts in 10 ms ticks, sampled; the process's own time is exact: a quiet host can
  // come out a few ms below zero, which is rounding, not negative use.
  const outsideCpuMs =
    o.attributable && hostBusyMs !== null && childrenCpuMs !== null ? Math.max(0, hostBusyMs - ownCpuMs - childrenCpuMs) : null;
  const measured = {
    wallMs: round(wallMs, 3),
    cpus,
    stealMs,
    stealFraction: stealMs === null || cpus === null || wallMs === 0 ? null : round(Math.min(1, stealMs / (wallMs * cpus)), 4),
    hostBusyMs,
    ownCpuMs: round(Math.max(0, ownCpuMs), 3),
    childrenCpuMs,
    outsideCpuMs: outsideCpuMs === null ? null : round(outsideCpuMs, 3),
    outsideCpuFraction: outsideCpuMs === null || wallMs === 0 ? null : round(Math.min(65_536, outsideCpuMs / wallMs), 4),
    hostCtxSwitches: delta(start.host?.ctxt, end.host?.ctxt),
    ownCtxSwitches: Math.max(0, ownCtx),
    pressure: {
      cpu: pressureDelta(start.pressure.cpu, end.pressure.cpu),
      io: pressureDelta(start.pressure.io, end.pressure.io),
      memory: pressureDelta(start.pressure.memory, end.pressure.memory),
    },
    thresholds: o.thresholds,
  };
  return { ...measured, flagged: judge(measured, o.thresholds) };
}
