/** What a run container prints: its stdout kept for the result, its stderr forwarded line by line. */
import { Writable } from 'node:stream';

/** Keeps the last `max` bytes written to it. */
export class Tail extends Writable {
  private chunks: Buffer[] = [];
  private size = 0;
  constructor(private readonly max: number) {
    super();
  }
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size > this.max && this.chunks.length > 1) this.size -= this.chunks.shift()?.length ?? 0;
    done();
  }
  text(): string {
    const all = Buffer.concat(this.chunks);
    return all.subarray(Math.max(0, all.length - this.max)).toString('utf8');
  }
}

/** Forwards complete lines to `log` and keeps a tail for error messages. */
export class LineLog extends Tail {
  private partial = '';
  constructor(
    private readonly log: (line: string) => void,
    maxBytes: number,
  ) {
    super(maxBytes);
  }
  override _write(chunk: Buffer, enc: BufferEncoding, done: () => void): void {
    const lines = (this.partial + chunk.toString('utf8')).split('\n');
    this.partial = lines.pop() ?? '';
    for (const line of lines) if (line.trim() !== '') this.log(`sandbox: ${line}`);
    super._write(chunk, enc, done);
  }
}
