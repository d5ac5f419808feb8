import { fork } from 'node:child_process'
import { join } from 'node:path'
import type { FromPublisher, ToPublisher } from './ingest-protocol.js'
import { repoRoot } from './ingest-service.js'

/**
 * Forks bench:ingest's publisher (test/bench/lib/ingest-publisher.ts) and returns it with `ask`: send a
 * message, wait for the answer of the given type (an `error` reply or the child's exit rejects).
 */
export function forkPublisher(execArgv: string[] = []) {
  const child = fork(join(repoRoot, 'test/bench/lib/ingest-publisher.ts'), [], {
    cwd: repoRoot,
    execArgv: [...execArgv, '--import', 'tsx'],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  })
  const ask = <T extends FromPublisher['type']>(message: ToPublisher, answer: T) =>
    new Promise<Extract<FromPublisher, { type: T }>>((resolve, reject) => {
      const onMessage = (reply: FromPublisher) => {
        if (reply.type !== answer && reply.type !== 'error') return
        child.off('message', onMessage)
        child.off('exit', onExit)
        if (reply.type === 'error') reject(new Error(`publisher: ${reply.message}`))
        else resolve(reply as Extract<FromPublisher, { type: T }>)
      }
      const onExit = (code: number | null) => reject(new Error(`publisher exited with code ${code}`))
      child.on('message', onMessage)
      child.once('exit', onExit)
      child.send(message)
    })
  return { child, ask }
}
