#!/usr/bin/env node
// The CLI is TypeScript run through tsx's loader, so `npx orderly` works straight after `npm ci`
// without a separate build step.
import { register } from 'tsx/esm/api';

// The AWS SDK warns at every start that its 2027 releases will need Node 22; Orderly pins a release
// that runs on Node 20, so the notice is noise here (the SDK's own switch turns it off).
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

register();
const { main } = await import('../src/cli/main.ts');
process.exitCode = await main(process.argv);
