/**
 * The services' structured log: one pino logger per process for start-up, the collector, hosts
 * and every request (the agent uses it too). JSON lines when stderr is not a terminal, so a log
 * pipeline can filter on fields; readable lines when it is. Secrets stay out: no request header
 * is logged (an Authorization header or a token field is redacted should one ever be), no query
 * string, and settings marked secret are never printed.
 * Request-scoped logging, the coordinator's own, is in coordinator/http/request-log.ts.
 */
import { pino, type Logger, type LoggerOptions as PinoOptions } from 'pino';
import pretty from 'pino-pretty';

/** Fields a log pipeline can filter on, next to the message. */
export type LogFields = Readonly<Record<string, unknown>>;
/** How the coordinator's parts log: a message for people, fields for machines. */
export type Log = (message: string, fields?: LogFields) => void;
/** Where a service's log goes: a logger, or a function given each JSON line (tests, embedding). */
export type LogSink = Logger | ((line: string) => void);

export interface LoggerOptions {
  /** The service, `coordinator` or `agent`: each line's `name`. */
  readonly name: string;
  /** Readable lines instead of JSON: for a terminal. */
  readonly pretty?: boolean;
  /** Each JSON line (without its newline) goes here instead of stderr. */
  readonly lines?: (line: string) => void;
}

/** Defence in depth: nothing logs these today, and nothing that ever does may leak them. */
const REDACTED = ['req.headers.authorization', 'req.headers.cookie', 'headers.authorization', 'headers.cookie', 'authorization', 'token'];

export function createLogger(o: LoggerOptions): Logger {
  const options: PinoOptions = {
    name: o.name,
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: REDACTED, censor: '[redacted]' },
  };
  const { lines } = o;
  if (lines !== undefined) {
    return pino(options, {
      write: (line: string) => {
        lines(line.endsWith('\n') ? line.slice(0, -1) : line);
      },
    });
  }
  if (o.pretty === true) {
    // Synchronous, in this thread: a line is out before the process exits on an error.
    const stream = pretty({
      destination: 2,
      sync: true,
      colorize: true,
      singleLine: true,
      translateTime: 'SYS:HH:MM:ss.l',
      // The access line's message already says method, path, status and duration.
      ignore: 'pid,hostname,name,req,res,durationMs',
    });
    return pino(options, stream);
  }
  return pino(options, pino.destination({ fd: 2, sync: true }));
}

export function loggerOf(sink: LogSink, name: string): Logger {
  return typeof sink === 'function' ? createLogger({ name, lines: sink }) : sink;
}
