/**
 * The settings, as every other module imports them: the table of every setting (environment
 * variable, flag, default, documentation; table.ts), reading them at start (load.ts) and what
 * the CLI and docs/reference.md show of them (docs.ts).
 */
export { fileFlagOf } from './kinds.js';
export { defaultOf, SETTINGS, type SettingName, type SettingsOf } from './table.js';
export { loadSettings } from './load.js';
export { settingOptions, settingsMarkdown } from './docs.js';
