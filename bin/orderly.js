#!/usr/bin/env node
// The CLI runs the build in dist/ (`npm run build`; `npm ci` and `npm install` run it through `prepare`).

// The AWS SDK warns at every start that its 2027 releases will need Node 22; Orderly pins a release
// that runs on Node 20, so the notice is noise here (the SDK's own switch turns it off).
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

let cli;
try {
  cli = await import('../dist/src/cli/main.js');
} catch (e) {
  if (e?.code !== 'ERR_MODULE_NOT_FOUND' || !String(e.message).includes('dist/src/cli/main.js')) throw e;
  console.error('orderly: the build is missing (dist/); run `npm run build` in the orderly folder');
  process.exit(1);
}
process.exitCode = await cli.main(process.argv);
