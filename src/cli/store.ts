import { resolve } from 'node:path'
import type { Command } from './command.js'

/** Other commands refuse a DATA_DIR without a store, so a typo never acts on a new, empty one. */
export const initStore: Command = {
  name: 'store init',
  synopsis: 'store init',
  summary: 'Create the store (DATA_DIR, or the tables in DATABASE_URL) if it does not exist, and bring its schema up to date',
  help: ['The service does this itself on its first start; this is for preparing a store before that, e.g. to create clients first.'],
  options: {},
  positionals: [],
  createsStore: true,
  async run(ctx) {
    const { dialect } = await ctx.store()
    return dialect === 'sqlite' ? { store: 'sqlite', data_dir: resolve(ctx.config.DATA_DIR) } : { store: 'postgres' }
  },
}
