import type { FastifyBaseLogger } from 'fastify'

/** What the process does with an error nothing else caught. */
export interface FatalPolicy {
  log: FastifyBaseLogger
  /** Ends the process; process.exit in production. */
  exit: (code: number) => void
}

/**
 * The process-level policy for an unexpected exception or an unhandled rejection: it is logged at `fatal` with the
 * error and where it came from, and the process exits with status 1 at once, so its
 * supervisor (systemd, Kubernetes, the container runtime) starts a fresh one. Node does not promise that a process
 * is sound after an uncaught exception, and a half-broken process that keeps answering is worse than a restart:
 * clients retry, and their Idempotency-Key makes the retry safe. Nothing a request sends is meant to reach here;
 * the black-box leg (test/blackbox/) holds every such path to a 4xx.
 *
 * The log's batched lines are written out by the 'exit' handler of the log's destination. No request id is logged:
 * an error that escapes every request's own error path no longer says which request it came from.
 */
export function installFatalPolicy(target: NodeJS.EventEmitter, policy: FatalPolicy): void {
  let ending = false
  const fatal = (err: unknown, origin: string) => {
    if (ending) return
    ending = true
    policy.log.fatal({ err, origin }, 'unexpected error: exiting so that the supervisor restarts the service')
    policy.exit(1)
  }
  target.on('uncaughtException', (err: Error, origin: string) => fatal(err, origin))
  target.on('unhandledRejection', (reason: unknown) => fatal(reason, 'unhandledRejection'))
}
