// `npm run lint`: ESLint with typescript-eslint's type-aware rules over the whole repository.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['**/node_modules/', '**/dist/', 'coverage/', '.tmp/', 'examples/*/data/', 'examples/*/out/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      globals: globals.node,
      // One program for everything, examples/ included (its `orderly` imports map to the source there).
      parserOptions: { project: './tsconfig.eslint.json', tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // Every rejection is handled: a promise is awaited, returned, or given a .catch / void on purpose.
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      // `_name` marks a value left unused on purpose (e.g. a field taken out of a rest spread).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true }],
      // An async method that implements a Promise-returning contract (a connector's flush or close) need not await.
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    // Tests read untyped wire JSON (REST bodies via res.json()) and the objects of Google's client, and
    // assert on them: the assertion is the type check there, so the no-unsafe-* family and no-explicit-any
    // are off for tests. Everything else stays on for them (floating and misused promises included).
    files: ['test/**', '**/*.test.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  {
    files: ['**/*.js', '**/*.cjs', '**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
  },
);
