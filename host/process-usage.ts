/**
 * What a process of ours has used so far, from /proc: CPU time, context switches (every thread's:
 * a server such as watchman reads in one thread and answers in others) and peak resident memory.
 * Read while it runs; a process that is gone, or a file not as expected, gives null, never a guess.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { MS_PER_TICK } from './interference.js';

export interface ProcessUsage {
  readonly userMs: number;
  readonly sysMs: number;
  readonly voluntaryCtxSwitches: number;
  readonly involuntaryCtxSwitches: number;
  readonly peakRssBytes: number;
}

function read(file: string): string | null {
  try {
    return readFileSync(file, 'latin1');
  } catch {
    return null;
  }
}

/** A `Name:  N` line of a status file, or null. */
function statusField(text: string, name: string): number | null {
  const m = new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(text);
  const n = m?.[1] === undefined ? NaN : Number(m[1]);
  return Number.isSafeInteger(n) ? n : null;
}

export function processUsage(pid: number): ProcessUsage | null {
  const stat = read(`/proc/${pid}/stat`);
  const status = read(`/proc/${pid}/status`);
  if (stat === null || status === null) return null;
  // Fields after the name, which may hold spaces and parentheses: utime and stime are the 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  const hwmKb = statusField(status, 'VmHWM');
  if (!Number.isSafeInteger(utime) || !Number.isSafeInteger(stime) || hwmKb === null) return null;
  let voluntary = 0;
  let involuntary = 0;
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return null;
  }
  for (const tid of tasks) {
    const t = read(`/proc/${pid}/task/${tid}/status`);
    // A thread that ended between the listing and the read took its counts with it.
    if (t === null) continue;
    voluntary += statusField(t, 'voluntary_ctxt_switches') ?? 0;
    involuntary += statusField(t, 'nonvoluntary_ctxt_switches') ?? 0;
  }
  return {
    userMs: utime * MS_PER_TICK,
    sysMs: stime * MS_PER_TICK,
    voluntaryCtxSwitches: voluntary,
    involuntaryCtxSwitches: involuntary,
    peakRssBytes: hwmKb * 1024,
  };
}

/** The sum over `pids`, or null when any of them cannot be read. */
export function processesUsage(pids: readonly number[]): ProcessUsage | null {
  const each = pids.map(processUsage).filter((u): u is ProcessUsage => u !== null);
  if (pids.length === 0 || each.length !== pids.length) return null;
  return each.reduce((a, u) => ({
    userMs: a.userMs + u.userMs,
    sysMs: a.sysMs + u.sysMs,
    voluntaryCtxSwitches: a.voluntaryCtxSwitches + u.voluntaryCtxSwitches,
    involuntaryCtxSwitches: a.involuntaryCtxSwitches + u.involuntaryCtxSwitches,
    peakRssBytes: a.peakRssBytes + u.peakRssBytes,
  }));
}
