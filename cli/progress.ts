/** Progress on stderr: one rewritten line on a terminal, a line per cell elsewhere (CI logs). */
import { formatDuration } from '../contract/units.js';
import type { Progress } from '../runner/local.js';

const clock = (ms: number) => {
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
};

export function progressPrinter(stream: NodeJS.WriteStream = process.stderr): { update: (p: Progress) => void; done: () => void } {
  let lastCell = -1;
  return {
    update(p) {
      const eta = p.etaMs === null ? '--:--' : clock(p.etaMs);
      const what = p.phase === 'warmup' ? `warmup ${p.repetition + 1}` : `run ${p.repetition + 1}`;
      const line = `cell ${p.cellIndex + 1}/${p.cells} ${what}  ${p.runsDone}/${p.runsTotal} runs  elapsed ${clock(p.elapsedMs)}  ETA ${eta}`;
      if (stream.isTTY) {
        stream.write(`\r\x1b[2K${line}`);
      } else if (p.cellIndex !== lastCell) {
        stream.write(`${line}\n`);
      }
      lastCell = p.cellIndex;
    },
    done() {
      if (stream.isTTY) stream.write('\r\x1b[2K');
    },
  };
}

export { formatDuration };
