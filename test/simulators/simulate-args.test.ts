import { describe, expect, it } from 'vitest'
import { parseSimulateArgs } from '../../simulators/simulate-args.js'

const creds = { ADMIN_CLIENT_ID: 'cl_admin', ADMIN_CLIENT_SECRET: 's3cret' }

describe('npm run simulate arguments', () => {
  it('reads the options with their defaults', () => {
    expect(parseSimulateArgs(['--totes', '3', '--scenario', 'door-open'], creds)).toEqual({
      totes: 3,
      scenario: 'door-open',
      url: 'http://localhost:8080',
      mqtt: null,
      pharmacy: null,
      clientId: 'cl_admin',
      clientSecret: 's3cret',
      rateMs: 1_000,
      speed: 1,
      seed: 1,
      forMs: null,
    })
    expect(
      parseSimulateArgs(
        [
          '--totes',
          '1',
          '--scenario',
          'freeze',
          '--rate',
          '250ms',
          '--speed',
          '60',
          '--for',
          '2m',
          '--client-id',
          'cl_x',
          '--client-secret',
          'y',
        ],
        {},
      ),
    ).toMatchObject({ rateMs: 250, speed: 60, forMs: 120_000, clientId: 'cl_x', clientSecret: 'y' })
  })

  it.each([
    [['--scenario', 'normal'], /--totes is required/],
    [['--totes', '0', '--scenario', 'normal'], /--totes must be a whole number/],
    [['--totes', '2', '--scenario', 'meltdown'], /--scenario must be one of normal, door-open/],
    [['--totes', '2', '--scenario', 'normal', '--rate', 'fast'], /--rate must be a duration/],
    [['--totes', '2', '--scenario', 'normal', '--speed', '0.5'], /--speed must be a number from 1/],
    [['--totes', '2', '--scenario', 'normal', '--bogus'], /Unknown option '--bogus'/],
    [['--totes', '2', '--scenario', 'normal', '--url', 'localhost:8080'], /--url must be an http/],
  ])('refuses %j with one clear line', (argv, message) => {
    const result = parseSimulateArgs(argv, creds)
    expect(result).toHaveProperty('error')
    const { error } = result as { error: string }
    expect(error).toMatch(message)
    expect(error).not.toContain('\n')
  })

  it('says where credentials come from when there are none', () => {
    expect(parseSimulateArgs(['--totes', '1', '--scenario', 'normal'], {})).toEqual({
      error: expect.stringMatching(/--client-id .*ADMIN_CLIENT_ID/),
    })
  })
})
