/**
 * What users read about the settings, written from the table: each setting's command-line
 * options with their help, and the Markdown table of docs/reference.md.
 */
import type { z } from 'zod';
import { fileFlagOf, type Setting } from './kinds.js';
import { SETTINGS, type SettingName } from './table.js';

/**
 * The command-line options of a setting, for commander: its flag, and for a secret its file
 * flag (`--token-file <path>`), which loadSettings reads as `<name>File`.
 */
export function settingOptions(name: SettingName): { readonly flags: string; readonly description: string }[] {
  const s: Setting<z.ZodType> = SETTINGS[name];
  const main = { flags: s.flag, description: `${s.doc} [${s.env}; default ${s.default}]` };
  if (s.secret !== true) return [main];
  return [main, { flags: `${fileFlagOf(s)} <path>`, description: `a file holding ${s.env}'s value [${s.env}_FILE]` }];
}

/** The settings table as Markdown, for docs/reference.md. */
export function settingsMarkdown(): string {
  const rows = Object.values(SETTINGS).map((s: Setting<z.ZodType>) =>
    s.secret === true
      ? `| \`${s.env}\`, \`${s.env}_FILE\` | \`${s.flag}\`, \`${fileFlagOf(s)} <path>\` | ${s.default} | ${s.doc} |`
      : `| \`${s.env}\` | \`${s.flag}\` | ${s.default} | ${s.doc} |`,
  );
  return ['| variable | flag | default | what it sets |', '|---|---|---|---|', ...rows].join('\n');
}
