// ESLint flat config: the recommended rules of ESLint and typescript-eslint
// (syntax-level, no type information, so a lint run takes seconds).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', '.tap/**', 'bench/results/**', 'data/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { ecmaVersion: 2024, sourceType: 'module', globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', setImmediate: 'readonly', URL: 'readonly', AbortController: 'readonly', AbortSignal: 'readonly', TextEncoder: 'readonly', TextDecoder: 'readonly', queueMicrotask: 'readonly', structuredClone: 'readonly', performance: 'readonly', fetch: 'readonly', globalThis: 'readonly' } },
    rules: {
      // A closure declared before the timer it clears reads the variable first.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    // The dashboard's page script runs in a browser, as a classic script (no build step).
    files: ['dashboard/**/*.js'],
    languageOptions: { sourceType: 'script', globals: { window: 'readonly', document: 'readonly', sessionStorage: 'readonly', fetch: 'readonly', URLSearchParams: 'readonly', Intl: 'readonly', Node: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly' } },
  },
  {
    // Mocks and tests read arbitrary wire JSON: `any` is the honest type there.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
