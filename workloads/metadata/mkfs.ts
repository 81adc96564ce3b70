/**
 * The mkfs command line for a cell, built from checked words only, and the explanation of a
 * refusal in the tool's own words plus what they mean.
 */
import { FsbenchError } from '../../contract/errors.js';
import { MKFS_OPTIONS } from '../../contract/workloads/metadata/index.js';
import { command, describeCommand } from './command.js';
import type { MetadataParams } from './params.js';

type BuiltFs = Exclude<MetadataParams['fs'], 'none'>;

const PROGRAMS: Readonly<Record<BuiltFs, { file: string; pkg: string; fixed: readonly string[] }>> = {
  xfs: { file: 'mkfs.xfs', pkg: 'xfsprogs', fixed: ['-q'] },
  // -F: mke2fs asks before writing to something that is not a block device.
  ext4: { file: 'mkfs.ext4', pkg: 'e2fsprogs', fixed: ['-q', '-F'] },
  btrfs: { file: 'mkfs.btrfs', pkg: 'btrfs-progs', fixed: ['-q'] },
};

/**
 * Arguments for mkfs: suboptions of one flag are joined (`-m crc=0,finobt=0`), because each
 * tool documents them that way.
 */
export function mkfsArgs(fs: BuiltFs, p: Pick<MetadataParams, 'inodeSize' | 'agCount' | 'mkfsOptions'>): string[] {
  const groups = new Map<string, string[]>();
  const push = (flag: string, value: string) => {
    groups.set(flag, [...(groups.get(flag) ?? []), value]);
  };
  if (p.inodeSize !== null) {
    if (fs === 'xfs') push('-i', `size=${p.inodeSize}`);
    else if (fs === 'ext4') push('-I', String(p.inodeSize));
  }
  if (p.agCount !== null && fs === 'xfs') push('-d', `agcount=${p.agCount}`);
  for (const word of p.mkfsOptions) {
    const option = MKFS_OPTIONS[word];
    if (option?.fs !== fs) continue;
    const [flag, value] = option.args;
    if (flag !== undefined && value !== undefined) push(flag, value);
  }
  const args = [...PROGRAMS[fs].fixed];
  for (const [flag, values] of groups) args.push(flag, values.join(','));
  return args;
}

const EXPLANATIONS: readonly { readonly pattern: RegExp; readonly why: string }[] = [
  {
    pattern: /Minimum inode size for CRCs is/i,
    why:
      'XFS with metadata CRCs (the V5 format, mkfs.xfs\'s default) needs inodes of at least 512 bytes. 256-byte inodes ' +
      'exist only in the old V4 format (mkfsOptions: crc=0), which kernels built without CONFIG_XFS_SUPPORT_V4 cannot ' +
      'mount; use inodeSize 512 or more to compare inode sizes on this kernel.',
  },
  {
    pattern: /agsize .*too small|allocation group/i,
    why: 'the requested agCount does not fit this fsSize: each XFS allocation group needs at least 16MiB.',
  },
  {
    pattern: /for -i size option/i,
    why: 'XFS inodes are 256 to 2048 bytes, and at least 512 with metadata CRCs.',
  },
  {
    pattern: /invalid inode size/i,
    why: 'ext4 inodes must be a power of two from 128 bytes up to the block size (4KiB).',
  },
  {
    pattern: /without CRC|CRC support|CRCs? (are|is) (needed|required)/i,
    why: 'the chosen XFS features need metadata CRCs (crc=1, the V5 format): crc=0 makes the old V4 format without them.',
  },
];

/** Makes the filesystem on `image`; a refusal is FS_REFUSED with mkfs's message and what it means. */
export async function makeFilesystem(fs: BuiltFs, p: MetadataParams, image: string): Promise<string> {
  const program = PROGRAMS[fs];
  const args = [...mkfsArgs(fs, p), image];
  const shown = describeCommand(program.file, args, { [image]: 'IMAGE' });
  const r = await command(program.file, args);
  if (r.ok) return shown;
  if (r.missing) {
    throw new FsbenchError('TARGET_UNUSABLE', `${program.file} is not installed: install the ${program.pkg} package to measure fs: ${fs}`);
  }
  // mkfs.xfs follows a refusal with its whole usage text; the refusal is what comes before it.
  const said = (r.output.split(/\n\s*Usage:/)[0] ?? r.output).trim().replace(/\s*\n\s*/g, ' ');
  if (/No space left on device/i.test(said)) {
    throw new FsbenchError('NO_SPACE', `${shown} ran out of space in the scratch directory: ${said}`);
  }
  const why =
    EXPLANATIONS.find((e) => e.pattern.test(said))?.why ??
    `${program.file} does not make a filesystem with this combination of inodeSize, agCount, fsSize and mkfsOptions.`;
  throw new FsbenchError('FS_REFUSED', `${program.file} refused (${shown}): "${said}". ${why}`);
}
