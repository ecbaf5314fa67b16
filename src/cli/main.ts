import { Command, CommanderError } from 'commander';
import { runCoreDemo } from './core-demo.js';

/** Builds the `orderly` command line. Returns the process exit code. */
export async function main(argv: string[]): Promise<number> {
  const program = new Command()
    .name('orderly')
    .description("Google Cloud Pub/Sub's ordered delivery and export subscriptions on one machine, with real storage")
    .exitOverride()
    .showHelpAfterError();

  program
    .command('demo')
    .description('publish a CDC stream of order changes and consume it in per-key order (no external service needed)')
    .option('--data-dir <dir>', 'where the store goes (default: a temporary directory, removed afterwards)')
    .addHelpText('after', '\nExample:\n  $ orderly demo\n  $ orderly demo --data-dir ./orderly-data')
    .action(async (opts: { dataDir?: string }) => {
      await runCoreDemo(opts);
    });

  try {
    await program.parseAsync(argv);
    return 0;
  } catch (e) {
    if (e instanceof CommanderError) return e.exitCode;
    console.error(`orderly: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
}
