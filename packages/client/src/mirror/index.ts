/** The mirror (Node only: it writes a folder): the function behind `oddsfiles mirror` and `oddsfiles-mirror`. */
export { runMirror, KEY_ENV, STATE_FILE, type MirrorIO, type MirrorOptions } from './mirror.js';
export { mirrorCommand, parseMirrorArgs, MIRROR_USAGE } from './command.js';
