import { type MapStringsOptions, mapStrings } from './map-strings.js';

/** What replaces a secret. */
export const REDACTED = '[REDACTED]';

/**
 * Key names whose values are secrets, matched case-insensitively after removing `-`, `_` and `.`,
 * as a substring (`db_password`, `X-Api-Key` and `refreshToken` all match).
 */
export const DEFAULT_SECRET_KEYS: readonly string[] = [
  'password',
  'passwd',
  'passphrase',
  'secret',
  'token',
  'authorization',
  'apikey',
  'cookie',
  'privatekey',
  'credential',
  'accesskey',
  'sessionkey',
  'signature',
  'mfacode',
  'otpcode',
  '2facode',
];

/** A value pattern and what a match is replaced by. */
export interface SecretPattern {
  readonly name: string;
  readonly pattern: RegExp;
  readonly replace: string;
  /**
   * A cheaper test that every text `pattern` matches passes (a literal it cannot match without): the
   * pattern is skipped for a text that fails it. For patterns whose own scan is costly on ordinary text
   * (a name-character run tried from each position, lookbehinds at every base64 character).
   * @default undefined (the pattern is always tried)
   */
  readonly requires?: RegExp;
}

// Key names whose value is a secret in `key=value`, `key: value`, `"key":"value"` and header form. The
// name must END in one of these words (`dbPassword`, `x_api_key`, `_authToken`, `SharedAccessKey`), so
// `max_tokens: 1500`, `token_count=3` and `passwordless` stay; short words must be the whole name.
// `pass` ends a name only after a separator (`DB_PASS`, `smtp.pass`, not `bypass` or `compass`); Rails'
// `SECRET_KEY_BASE` ends in `base`; `api key` may be written with a space (`invalid api key: ...`).
// `pwd` likewise ends a name only after a separator (`MYSQL_PWD`, `smtp_pwd`, not the shell's `OLDPWD`).
const SECRET_KEY_SUFFIX =
  '(?:password|passwd|passphrase|secret|token|api[ _-]?key|access[_-]?key|secret[_-]?key(?:[_-]?base)?|private[_-]?key|account[_-]?key|client[_-]?secret|credentials?|signature|session[_-]?(?:id|key)|[_.-]pass|[_.-]pwd)';
const SECRET_KEY_WHOLE = '(?:pass|pwd|pin|sig|_auth)';
// A word every secret key name above holds (`password`, `passwd` and `passphrase` hold `pass`; each
// `…key` holds `key`; `signature` holds `sig`): what SECRET_KEY cannot match without, tested first.
const SECRET_KEY_WORD = /pass|pwd|pin|sig|_auth|secret|token|key|credential|session/i;
// A quote as JSON writes it at each depth of JSON quoted inside JSON strings: `"`, `\"` (JSON inside a
// JSON string), `\\\"` (that inside another string: a logger's line holding it), `\\\\\\\"`, ... (2^n - 1
// backslashes), up to five levels; `'` likewise. Its backslashes, without the quote character: a caller
// puts it before `["']`, after `(?<!\\)` where the quote may follow a backslash of its own (the run is the
// quote's own, never the tail of a longer one).
const QUOTE_RUN = '\\\\{31}|\\\\{15}|\\\\{7}|\\\\{3}|\\\\?';
// The body and closing quote of a value opened by quote group `q` (its backslashes in group `b`), as JSON
// escapes it at that depth: a quote inside the value is escaped once more than the closing one (`\"`
// inside `"..."`, `\\\"` inside `\"...\"`), and a backslash of the value is a run of 2^n. The quote that
// closes is the one whose run is `b` after a whole number of such backslashes (`a\\"` closes after
// `a\`): read at the start of each run, which is read whole, so each character is read once. At least one
// character with `min` '+'.
const quotedBody = (q: number, b: number, min: '*' | '+' = '*'): string => {
  const closing = `(?:\\${b}\\${b}\\\\\\\\)*\\${q}`;
  return `(?:(?!${closing})(?:[^\\\\\\r\\n]|\\\\+[^\\\\\\r\\n]))${min}${closing}`;
};
// A character of a bare (unquoted) value that may stand inside a JSON string: a backslash run only when
// no quote follows it, so the escape of a closing `\"` (or `\\\"`) stays with its quote (JSON stays JSON).
// `chars` are the characters the value excludes besides backslashes.
const bareChar = (chars: string): string => `(?:[^${chars}\\\\]|\\\\+(?![\\\\"']))`;
// The key as written: an optional prefix of name characters, the secret word, an optional closing
// quote (JSON, also escaped as `\"` when JSON sits inside a JSON string, `\\\"` another level down, or
// URL-encoded as `%22`), then `=`, `:` or `=>` (PHP and Ruby hashes), or `%3D`/`%3A` (a URL-encoded
// query or JSON). Not preceded by a name character, so the whole name is matched (after `%22` or `%3F`
// the prefix holds the code's digits and letters: `22client_secret`, which still ends in the secret word).
// The shell's working directory, `PWD=/home/app` (`pwd: /tmp`, `"PWD":"C:\\app"`): a `pwd` that is the whole
// name and holds an absolute path is no password.
const PWD_PATH = `(?:(?:${QUOTE_RUN})["']|%22)?[ \\t]*(?:=>|[=:]|%3[DdAa])[ \\t]*(?:(?:${QUOTE_RUN})["'])?(?:~?/|[A-Za-z]:\\\\)`;
const KEY_SEPARATOR = `(?:(?:${QUOTE_RUN})["']|%22)?[ \\t]*(?:=>|[=:]|%3[DdAa])[ \\t]*`;
const SECRET_KEY = `(?<![A-Za-z0-9_.-])(?:[A-Za-z0-9_.-]*${SECRET_KEY_SUFFIX}|${SECRET_KEY_WHOLE.replace('pwd', `pwd(?!${PWD_PATH})`)})${KEY_SEPARATOR}`;
// A camelCase name whose last word is `Pwd` (`smtpPwd`, `dbPWD`) or `Pass` (`smtpPass`, `redisPASS`), as
// the key matcher for objects reads it (`WORD_BREAK`: a lower-case letter or digit before the capital; the
// last word `Pass`, `PAss`, `PASs` or `PASS`). Case-sensitive, so its rules go without the `i` flag:
// `OLDPWD`, `cwd`, `bypass`, `compass` and `SMTPPASS` are no such name. A path as a `Pwd`'s value is a
// working directory, as for `PWD`. A `Pass` is also a step or a ticket (`firstPass`, `multiPass`,
// `onePass`, `isPass`): a flag word or a number of up to three digits as its whole value is no password
// (`firstPass=true`, `multiPass=3`, `"onePass":"off"`).
const CAMEL_PASS_FLAG = `(?:(?:${QUOTE_RUN})["']|\\\\+u002[27])?(?:${['true', 'false', 'yes', 'no', 'on', 'off', 'enabled', 'disabled', 'none', 'null', 'undefined', 'auto'].map(anyCase).join('|')}|\\d{1,3}(?:\\.\\d+)?)(?![^\\s&;,'"<>)}\\]\\\\])`;
const CAMEL_SECRET_KEY = `(?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]*[a-z0-9]P(?:[wW][dD](?!${PWD_PATH})|(?:ass|A(?:ss|S[sS]))(?!${KEY_SEPARATOR}${CAMEL_PASS_FLAG}))${KEY_SEPARATOR}`;

// A YAML block scalar under a secret key (`password: |`, `token: >-`, `key: |2+`, a k8s manifest or a
// config dump): its indicator, and the key's line up to it, from the line's start (its indentation
// captured: the block is every following line indented more, blank lines among them). The key may be a
// sequence item (`- password: |`) or quoted. In text as written, and in a JSON string whose line breaks
// are `\n` (its indentation spaces or `\t`, its line's characters read escape by escape).
const YAML_NAME = `(?:[A-Za-z0-9_.-]*${SECRET_KEY_SUFFIX}|${SECRET_KEY_WHOLE})`;
const YAML_INDICATOR = '[|>][-+1-9]{0,2}';
const YAML_BLOCK = `^([ \\t]*)(?:-[ \\t]+)*["']?${YAML_NAME}["']?[ \\t]*:[ \\t]*${YAML_INDICATOR}[ \\t]*(?:#[^\\r\\n]*)?`;
// Its line breaks are `\n` in a JSON string, `\\n` in JSON inside a JSON string, `\\\\n` a level further
// down (a logger's line holding that); likewise a tab. Read at any such level here; the block's lines at
// the level of the first break after the indicator (see `jsonLevel`).
const JSON_SPACE = '(?: |\\\\+t)';
const JSON_BREAK = '(?:\\\\+r)?\\\\+n';
const YAML_BLOCK_IN_JSON = `(?<=(?<!\\\\)\\\\+n|")(${JSON_SPACE}*)(?:-${JSON_SPACE}+)*(?:(?:${QUOTE_RUN})["'])?${YAML_NAME}(?:(?:${QUOTE_RUN})["'])?${JSON_SPACE}*:${JSON_SPACE}*${YAML_INDICATOR}${JSON_SPACE}*`;
// A space, a line break and a character of a line at one level, group `g` holding a break's backslashes
// but one (empty in a JSON string, `\` a level down): a line's character is no break, nor the quote
// that ends the JSON string at that level (`"`, `\"` a level down); a backslash run is read whole with
// the character after it, so each character is read once.
const jsonLevel = (g: number): { space: string; lineBreak: string; lineChar: string } => ({
  space: `(?: |\\${g}\\\\t)`,
  lineBreak: `\\${g}\\\\(?:r\\${g}\\\\)?n`,
  lineChar: `(?:[^\\\\"\\r\\n]|(?!\\${g}\\\\(?:r\\${g}\\\\)?n|\\${g}")\\\\+[^\\\\\\r\\n])`,
});
const LEVEL = jsonLevel(4);
// What follows a block scalar's indicator on its line: nothing but a comment (a key's bare value is no
// `|` or `>` then).
const YAML_INDICATOR_ALONE = `${YAML_INDICATOR}(?:[ \\t]|\\\\+t)*(?:#[^\\r\\n]*)?(?:\\r?\\n|${JSON_BREAK}|$)`;

// `echo <password> | sudo -S <cmd>`: the password a command line feeds sudo on its stdin, echoed in an
// error. sudo's options before `-S` (`-k`, `-u root`, `--user=root`), `-S` alone or among short flags
// (`-kS`), or `--stdin`. The program's word (`sudo`, `/usr/bin/sudo`) is read from its start only.
const SUDO_OPTION = `-{1,2}[A-Za-z][A-Za-z-]*(?:=[^\\s|;&]*|[ \\t]+[^\\s|;&-][^\\s|;&]*)?`;
const SUDO_STDIN = `(?<![^\\s'"|;&(\`])(?:[^\\s'"|;&]*/)?sudo(?:[ \\t]+${SUDO_OPTION})*?[ \\t]+(?:-[A-Za-z]*S[A-Za-z]*|--stdin)(?![A-Za-z-])`;
// A word of echo's or printf's arguments: not a quote, space or another command (`|`, `;`, `&`), nor
// another `echo` or `printf` (each run is read from one start).
const ECHO_WORD = `(?!(?:echo|printf)[ \\t])${bareChar(`\\s\\0'"|;&`)}+`;

// A command line's long option named like a secret key, and the spaces, tabs or NULs before its value.
const SECRET_OPTION = `(?<![A-Za-z0-9_.-])--[A-Za-z0-9_.-]*${SECRET_KEY_SUFFIX}[ \\t\\0]+`;

// A name in any letter case (`MYSQL`, `Mysql.exe`, `SSHPASS.EXE` on Windows), for a pattern whose other
// parts are case-sensitive (`-p` is a password where `-P` is a port). A declaration: the key rules above use it.
function anyCase(name: string): string {
  return name.replace(/[a-z]/g, (letter) => `[${letter}${letter.toUpperCase()}]`);
}
const EXE = `\\.${anyCase('exe')}`;
// A program's name as a whole word of a command line (also as a path's last part, or `.exe`), in any
// letter case, the start of the option patterns that hold only after certain programs. The word ends
// at a space, NUL or quote, also one escaped in JSON text (`\"mysql\"`, `\\\"mysql\\\"`).
const programWord = (names: string): string =>
  `(?<![A-Za-z0-9_.-])(?:${names})(?:${EXE})?(?=[\\s\\0'"]|\\\\+["']|$)`;
const MYSQL_PROGRAM = programWord(`(?:${anyCase('mysql')}|${anyCase('mariadb')})[A-Za-z0-9_-]*`);
const CURL_PROGRAM = programWord(`${anyCase('curl')}|${anyCase('wget')}|${anyCase('http')}[sS]?`);
// The rest of that program's command line up to the option: not past a line break, `;`, `|` or `&&`
// (another command), nor past another word of the same programs. A match starts at every such word, so
// the last one before the option takes over from there: each stretch is read from one start, not from
// each earlier one again (`mysql mysql mysql ...` would be quadratic). Up to the first such option, or
// with `last` up to the last one.
const commandRest = (program: string, last = false): string =>
  `(?:(?!&&|${program})[^\\r\\n;|])*${last ? '' : '?'}`;
// The same inside a printed argument list, whose items `util.inspect` puts on lines of their own once
// the list is long: up to the option, not past the list's end (`]`) nor another of the programs' words.
const listRest = (program: string): string => `(?:(?!${program})[^\\]])*?`;
// A bare word of a command line: it ends at a quote, also at one escaped in JSON text (`\"`, `\\\"`),
// whose backslashes stay with it (JSON stays JSON).
const BARE = bareChar(`\\s\\0'"`);
// A quote opening a command line's value: `'` or `"`, also as escaped in JSON text at any depth (`\"`,
// `\\\"`); the value runs to the same quote (shell quoting: no escapes inside).
const OPEN_QUOTE = `((?<!\\\\)(?:${QUOTE_RUN})["'])`;
// An option's value: quoted (the quotes kept), or a bare word. `$2` is the quote, empty for a bare word.
// Each form declines what a redaction left (`-p'[REDACTED]'`).
const OPTION_VALUE = `(?:${OPEN_QUOTE}(?!\\[REDACTED\\]\\2)(?:(?!\\2)[^\\r\\n\\0])+\\2|(?!\\[REDACTED\\])${BARE}+)`;
// `user:password` as an option's value: the user (`$3` quoted, `$4` bare) is kept, what follows the
// first colon goes. Without a colon (`-u root`, `--user ann`) it is a user name alone.
const USER_PASSWORD = `(?:${OPEN_QUOTE}([^\\r\\n\\0:'"]*):(?!\\[REDACTED\\]\\2)(?:(?!\\2)[^\\r\\n\\0])+\\2|((?:(?!:)${BARE})*):(?!\\[REDACTED\\])${BARE}+)`;

// A printed argument list (`util.inspect`'s `[ 'mysql', '--password', 'x' ]`, JSON's `["-u","a:x"]`, and
// `[\"-u\",\"a:x\"]` in JSON inside a JSON string, `\\\"` a level further down): an option as a
// whole item, `$2` its quote, and what stands between it and the next item (its closing quote, a comma,
// spaces or line breaks).
const printedItem = (option: string): string => `((?<!\\\\)(?:${QUOTE_RUN})["'])${option}\\2,\\s*`;
// The next item as an option's value: its quotes kept (`$3`, its backslashes `$4`), what is between them
// goes. An escaped character (`\'`, `\"`, `\\\"` inside `\"...\"`) is read as one, so the closing
// quote is the item's own and JSON stays JSON. An item starting with `-` is the next option.
const PRINTED_VALUE = `((?<!\\\\)(${QUOTE_RUN})["'])(?!-|\\[REDACTED\\]\\3)${quotedBody(3, 4)}`;
// `user:password` as the next item: the user (`$5`) is kept, what follows its first colon goes.
const PRINTED_USER_PASSWORD = `((?<!\\\\)(${QUOTE_RUN})["'])((?:(?!(?:\\4\\4\\\\\\\\)*\\3)(?:[^\\\\\\r\\n:]|\\\\+[^\\\\\\r\\n]))*):(?!\\[REDACTED\\]\\3)${quotedBody(3, 4, '+')}`;

// The parts of a `.netrc` entry: the space between tokens (one line or several), a token's value (not
// the `password` keyword), an entry up to its `password` keyword. A machine with a dot in its name
// (`api.example.com`, `10.0.0.7`) or `default` opens an entry by itself. A bare machine name (`localhost`,
// `db01`, `build-server`) is also a word of prose ("machine learning"), so such an entry needs its
// `login` and a login that reads as a user name: not ending in punctuation ("login page: password
// reset"), nor one of the words that follow "login" in a sentence ("login page", "login with").
const NETRC_SPACE = '[ \\t\\r\\n]+';
const NETRC_TOKEN = `(?!password(?!\\S))\\S+`;
const NETRC_PROSE_LOGIN =
  'page|screen|form|prompt|button|link|flow|field|box|dialog|window|attempts?|fail(?:ed|s|ures?)?|errors?|issues?|problems?|required|disabled|enabled|shell|console|sessions?|details|info|and|or|with|via|to|for|is|was|as|by|the|a|an|using|on|in|then|but';
const NETRC_ENTRY = `(?<![A-Za-z0-9_.-])(?:(?:machine${NETRC_SPACE}[^\\s.]*\\.\\S+|default)(?:${NETRC_SPACE}(?:login|account)${NETRC_SPACE}${NETRC_TOKEN})*|machine${NETRC_SPACE}[A-Za-z0-9_-]+(?:${NETRC_SPACE}account${NETRC_SPACE}${NETRC_TOKEN})?${NETRC_SPACE}login${NETRC_SPACE}(?!(?:password|${NETRC_PROSE_LOGIN})(?!\\S))\\S*[^\\s:;,.!?)](?:${NETRC_SPACE}account${NETRC_SPACE}${NETRC_TOKEN})?)`;
// The password: a quoted token goes with its quotes (also escaped in JSON text: `\"p w\"`), a bare one
// to the next space, or to a quote that ends a JSON string or printed value around it (`password x"}`),
// whose escape stays with it.
const NETRC_VALUE = `(?:((?<!\\\\)(?:${QUOTE_RUN})")(?:(?!\\2)[^\\r\\n])+\\2|(?:${bareChar(`\\s"'`)}|["'](?![\\s,;:\\]})]|$))+)`;

// A `.pgpass` line, `hostname:port:database:username:password` (libpq's password file; `*` matches any
// value in the first four fields, `\:` and `\\` are escapes), as a whole line: from a line's start (the
// text's, after a line break, after a JSON `\n` at any depth, or at a JSON string's opening quote) to its
// end (a line break, JSON's `\n`, the text's end, or a quote that closes a JSON string). No space in it,
// every field non-empty, the port a port (1-65535) or `*`, database and user `*` or starting with a letter
// or `_` (not IPv6's `fe80:1:2:3:4`), and the host one that reads as a host (PGPASS_HOST_PORT). Timestamps,
// `host:5432`, a stack frame's `file.js:10:5` and a log prefix followed by its message
// (`app:1234:worker:info: started`) have too few fields or a space.
const PGPASS_ESCAPE = '\\\\+[^\\s\\\\nrt"]';
const PGPASS_CHAR = `(?:[^\\s:\\\\"]|${PGPASS_ESCAPE})`;
const PGPASS_START = `(?:^|(?<=(?<!\\\\)\\\\+n)|(?<=[[{:,][ \\t]*(?:${QUOTE_RUN})"))`;
const PGPASS_PORT = '(?:[1-9]\\d{0,3}|[1-5]\\d{4}|6[0-4]\\d{3}|65[0-4]\\d{2}|655[0-2]\\d|6553[0-5])';
// A host that reads as one by itself: `*`, a socket directory (`/var/run/postgresql`), a name or address
// with a dot (`db.internal`, `10.0.0.7`), `localhost`, an IPv6 address with its colons escaped (`\:\:1`).
const PGPASS_HOST_NAMED = `(?:\\*|/(?:[A-Za-z0-9._~+/-]|${PGPASS_ESCAPE})*|[A-Za-z0-9_-]+(?:\\.[A-Za-z0-9_-]+)+|localhost|(?:[0-9A-Fa-f]{0,4}\\\\+:){2,7}[0-9A-Fa-f]{0,4})`;
// The host and port. A bare name (`db`, `replica`, `session`) is also the first word of a Redis key
// (`session:1234:user:profile:v1`), so it needs PostgreSQL's or PgBouncer's usual port (5432-5439,
// 6432-6439); in a whole line (`bare`) a name of letters ending in digits (`db01`, `pg1`, `postgres-0`)
// takes any port too.
const pgpassHostPort = (bare: boolean): string =>
  `(?:(?:${PGPASS_HOST_NAMED}${bare ? '|[A-Za-z][A-Za-z_-]+\\d+' : ''}):(?:${PGPASS_PORT}|\\*)|[A-Za-z][A-Za-z0-9_-]*:[56]43\\d)`;
const PGPASS_NAME = `(?:\\*|[A-Za-z_]${PGPASS_CHAR}*)`;
const PGPASS_END = `(?=[ \\t]*$|\\\\+[rn]|\\\\*"[ \\t]*(?:[,}\\]]|$))`;
// The same entry inside a sentence (`connect to db.internal:5432:orders:app:x failed`): a word of its own,
// after a space, `(`, `[`, `=`, `,`, `;`, a quote or a JSON `\n`, and its host one that reads as a host
// (no bare name with another port). The password runs to a space, a quote, `<` or a JSON escape; the
// punctuation that ends a sentence or a clause after it (`x.`, `x),`) stays.
const PGPASS_WORD_START = `(?:^|(?<=[\\s(\\[{=,;'"\`<>])|(?<=(?<!\\\\)\\\\+[nrt]))`;
const PGPASS_TRAIL = '[.,;!?)\\]}]';
const PGPASS_WORD_PASSWORD = `(?:[^\\s:\\\\"'\`<>]|${PGPASS_ESCAPE})+(?<!${PGPASS_TRAIL})(?=${PGPASS_TRAIL}*(?:[\\s"'\`<>]|\\\\|$))`;
const PGPASS_REQUIRES = /:(?:\d+|\*):[A-Za-z_*]/;

// A password named in prose: `the password is x`, `password was x`, `passphrase is x`, `passwd x`,
// `password x`, `password for bob is x`. Prose says far more about passwords than it gives one ("password
// is incorrect", "password is 8 characters", "passwd file", "password reset"), so the value must look
// like one: a word of six characters or more (no space, quote or backslash) holding a letter and a digit
// or one of `@#$%^&*+=~|`, not a word of a name with a number in it (`sha256`, `base64`, `HS256`, `utf-8`,
// `x509`), nor a version (`v1.2.3`), nor a compound ending in a lower-case word (`base64-encoded`,
// `2fa-only`), nor a date. The punctuation that ends a sentence or a clause after it (`x.`, `x,`, `x)`)
// stays; a value in quotes keeps them.
const PROSE_CHAR = '[^\\s\'"`\\\\]';
const PROSE_TRAIL = '[.,;:!?)\\]}]';
const PROSE_VALUE_END = `(?=${PROSE_TRAIL}*(?:[\\s'"\`\\\\]|$))`;
const PROSE_NOT_SECRET = `(?:(?:sha|md|base|utf-?|aes|rsa|hs|rs|es|ps|pbkdf|argon|oauth|x|ipv|crc|ed|blake|tls|ssl|v)\\d+[A-Za-z]*|v\\d+(?:\\.\\d+)+(?:[-+.][A-Za-z0-9]+)*|(?:[A-Za-z0-9]+-)+[a-z]{2,}|\\d{4}-\\d{2}-\\d{2}${PROSE_CHAR}*)${PROSE_VALUE_END}`;
// A value opening a bracket is an aside or an example (`password (user@host)`), not a password.
const PROSE_SECRET = `(?!\\[REDACTED\\]|[([{<]|${PROSE_NOT_SECRET})(?=${PROSE_CHAR}*?[A-Za-z])(?=${PROSE_CHAR}*?[0-9@#$%^&*+=~|])${PROSE_CHAR}{6,}(?<!${PROSE_TRAIL})${PROSE_VALUE_END}`;
// Base64 and the line breaks of a key body: real ones, or `\n` written inside JSON text (`\\n` when
// that JSON is itself quoted in a JSON string).
const B64 = '[A-Za-z0-9+/]';
const B64_BREAK = '(?:\\r?\\n|(?:\\\\{1,2}r)?\\\\{1,2}n)';
// `token x` needs more: a run of token characters (letters, digits, `._~+/=-`), 16 or more, holding a
// letter and a digit (`invalid token 3f9a2c81d0e94b7f`, a UUID), so `token expired` stays (12 or more after
// `api key`). A `.` ends it when no token character follows.
const TOKEN_CHAR = '[A-Za-z0-9_~+/=-]';
const proseToken = (min: number): string =>
  `(?!\\d{4}-\\d{2}-\\d{2})(?=${TOKEN_CHAR}*?[A-Za-z])(?=${TOKEN_CHAR}*?\\d)(?:${TOKEN_CHAR}|\\.(?=${TOKEN_CHAR})){${min},}(?=[.,;:!?)\\]}'"\`\\\\]|\\s|$)`;
const PROSE_TOKEN = proseToken(16);
const PROSE_KEYWORD = '(?<![A-Za-z0-9_./-])';
// Whom a password is for, between the keyword and `is` (`Password for bob is x`, `password for
// 'ann@example.com': x`): one word, quotes allowed, no colon (the colon form ends it).
const PROSE_USER = `for[ \\t]+[^\\s:\`\\\\]{1,64}(?:[ \\t]+(?:is|was)[ \\t]+|:[ \\t]+)`;

// An `auth` key in text (Docker's `config.json`, `"auths":{"host":{"auth":"<base64>"}}`, `.npmrc`,
// a proxy setting): `auth` as the whole name or the last word after `_`, `.` or `-` (`X_AUTH`,
// `basic_auth`), in any letter case. `auth` is also a setting's name (`auth=none`, `"auth":"basic"`,
// `auth: required`), so its value must look like a credential: base64 of printable text holding a colon
// (`user:password`), or 20 token characters or more holding a letter and a digit. Case-sensitive
// expressions (base64 is): the name is written in any case.
const AUTH_KEY = `(?<![A-Za-z0-9_.-])(?:[A-Za-z0-9_.-]*[_.-])?${anyCase('auth')}${KEY_SEPARATOR}(?:(?:${QUOTE_RUN})["']|%22)?`;
// Base64 read three bytes (four characters) at a time: a group of printable ASCII bytes (0x20-0x7f)
// is a first character whose six bits make 0x20-0x7f's top six (`I`-`Z`, `a`-`f`), a second whose low
// four bits are the second byte's high nibble, 2-7, and a third and fourth giving a third byte of
// 0x20-0x7f (the third's low two bits 0 with a fourth of 32 or more, or 1 with any fourth).
const B64_FIRST = '[I-Za-f]';
const B64_SECOND = '[C-HS-Xi-ny-z0-3]';
const B64_LAST_TWO = '(?:[AEIMQUYcgkosw048][g-z0-9+/]|[BFJNRVZdhlptx159][A-Za-z0-9+/])';
const B64_PRINTABLE = `${B64_FIRST}${B64_SECOND}${B64_LAST_TWO}`;
// A group holding `:` (0x3a) as its first, second or third byte, and the same in a last group of two
// bytes (three characters, `=` optional).
const B64_COLON = `(?:O[i-n]${B64_LAST_TWO}|${B64_FIRST}[DTjz](?:o[g-z0-9+/]|p[A-Za-z0-9+/])|${B64_FIRST}${B64_SECOND}[AEIMQUYcgkosw048]6|O[i-n]${B64}=?|${B64_FIRST}[DTjz][o-r]=?)`;
const B64_TAIL = `(?:${B64_FIRST}${B64_SECOND}${B64}=?|${B64_FIRST}${B64}(?:==)?)`;
// A setting's name written as lower-case words joined by `-`, `_` or `.`, each word starting with a
// letter (`oauth2-client-credentials-v2`, `scram_sha_256`): no token, though long and holding a digit.
const WORDS_NAME = `[a-z][a-z0-9]*(?:[-_.][a-z][a-z0-9]*)+(?![A-Za-z0-9_~+/=-])`;
// A token as an `auth` value: 20 characters or more, a letter and a digit among them, `=` only as its
// padding at the end (so no other `auth=` starts inside one: each value is read from one start).
const AUTH_TOKEN_CHAR = '[A-Za-z0-9_~+/-]';
const AUTH_TOKEN = `(?![/.~]|${WORDS_NAME}|\\d{4}-\\d{2}-\\d{2})(?=${AUTH_TOKEN_CHAR}*?[A-Za-z])(?=${AUTH_TOKEN_CHAR}*?\\d)(?:${AUTH_TOKEN_CHAR}|\\.(?=${AUTH_TOKEN_CHAR})){20,}={0,2}`;
// The value: eight characters or more of base64 whose every group is printable and one holds a colon
// (looked for ahead, so each group is read a bounded number of times), or such a token that is no path
// nor such a name.
const AUTH_VALUE = `(?:(?=${B64}{8})(?=(?:${B64_PRINTABLE})*${B64_COLON})(?:${B64_PRINTABLE})+${B64_TAIL}?|${AUTH_TOKEN})(?=[.,;:!?)\\]}'"\`\\\\&<>%]|\\s|$)`;

// Short key names whose value is a one-time or card code (`otp`, `totp`, `cvv`, `cvc`, `cvv2`,
// `mfa_code`, `otp_code`, `2fa_code`), as the whole name, the last word after `_`, `.` or `-`
// (`sms_otp`, `card.cvv`) or a camelCase last word (`smsOtp`, `cardCVV`, `userMfaCode`), as the key
// matcher for objects reads them. Such a code holds digits; a value without one is a setting
// (`otp: required`, `cvv=none`, `"totp":"enabled"`) and stays. `otpauth://` and `cvv_required=true`
// are no such name.
const SHORT_CODE_WORD = `(?:${anyCase('otp')}|${anyCase('totp')}|${anyCase('cvv')}2?|${anyCase('cvc')}2?|(?:${anyCase('mfa')}|${anyCase('otp')}|${anyCase('totp')}|2${anyCase('fa')})[_.-]?${anyCase('code')})`;
const SHORT_CODE_CAMEL =
  '(?:Otp|OTP|Totp|TOTP|Cvv|CVV|Cvc|CVC)2?|(?:Mfa|MFA|Otp|OTP|Totp|TOTP|2fa|2FA)_?(?:Code|CODE)';
const SHORT_CODE_KEY = `(?<![A-Za-z0-9_.-])(?:(?:[A-Za-z0-9_.-]*[_.-])?${SHORT_CODE_WORD}|[A-Za-z0-9_.-]*[a-z0-9](?:${SHORT_CODE_CAMEL}))${KEY_SEPARATOR}`;
// `2?` after every name: the camelCase names take it too (`smsOtp2`, found by the requires property test).
const SHORT_CODE_REQUIRES = /(?:otp|cvv|cvc|code)2?(?:\\*["']|%22)?[ \t]*(?:[=:]|%3[AaDd])/i;

// A crypt(3) hash as the second field of a `user:hash` line: an htpasswd entry (`bob:$apr1$salt$hash`)
// or a shadow line (`root:$6$salt$hash:19000:0:99999:7:::`, a locked `!$6$...`). In such a line the
// hash may have any length (the pattern above needs each scheme's own); a DES hash (13 characters)
// only before a shadow line's other fields. The user and those fields stay.
const CRYPT_ID = '(?:1|2[abxy]?|5|6|7|apr1|g?y|md5|sha1|sm3|argon2(?:id|i|d)|scrypt)';
const CRYPT_FIELD = `(?:!*\\$${CRYPT_ID}\\$(?=[^\\s:"'\\\\]{8})(?=[^\\s:$"'\\\\]*\\$)[^\\s:"'\\\\]+|!*[./A-Za-z0-9]{13}(?=(?::\\d*){6}:))`;

// An XML element named like a secret key (`password`, `Password`, `dbPassword`, `client_secret`,
// `apiKey`), after an optional namespace prefix (`db:password`, `ns2:ClientSecret`): the name ends in a
// secret word as a key's does (no space in it: `api key` is no element name).
const XML_SECRET_NAME = `(?:[A-Za-z_][\\w.-]*:)?(?:[\\w.-]*${SECRET_KEY_SUFFIX.replace('api[ _-]?key', 'api[_-]?key')}|${SECRET_KEY_WHOLE})`;
// The element's text: no child element (`<`), but CDATA sections (read to their `]]>`, each `]` once,
// `<` too but not another `<![CDATA[`); a `"` only when no JSON structure follows it (`","`, `"}`: the
// end of a JSON string around the element, which the text never crosses). A start's text reaches no
// other start but one inside its CDATA section, whose own text ends at the next `<`, and a CDATA
// section ends at the next one's opening: each character is read from one or two starts.
const XML_TEXT = `(?:[^<"]|"(?![ \\t]*(?:[,:}\\]]|$))|<!\\[CDATA\\[(?:[^\\]<]|\\](?!\\]>)|<(?!!\\[CDATA\\[))*\\]\\]>)+`;

// A SQL string literal as the value of a credential clause, its opening quote in `$2`: `'x'`, `"x"`
// (MySQL), also `\"x\"` inside a JSON string (any depth); a quote inside it doubled (`'a''b'`, the SQL
// escape) or escaped with a backslash (`'a\'b'`, MySQL's). Each backslash run is read whole with the
// character after it (an escape), a doubled quote as one: one reading, each character read once. The
// literal ends at its closing quote (`$3`), or, never closed (a message cut short, MySQL's `near '...'`
// quoting it), at a line break, the text's end or a quote followed by JSON structure or nothing
// (`","`, `"}`: the end of a JSON string around it): what it holds goes either way, so a start never
// fails after its opening quote, and the next start is looked for after it. An empty literal (`''`),
// and one already redacted, stay.
const SQL_LITERAL = `((?:\\\\{31}|\\\\{15}|\\\\{7}|\\\\{3}|\\\\?)"|')(?!\\2(?!\\2)|\\[REDACTED\\](?:\\2|\\\\*"|[\\r\\n]|$))(?:\\2\\2|(?!\\2)[^\\\\"\\r\\n]|(?!\\2)\\\\*"(?![ \\t]*(?:[,:}\\]]|$))|(?!\\2)\\\\+[^\\\\"\\r\\n])+(\\2)?`;
// A USER or ROLE statement (PostgreSQL's `CREATE ROLE`, `ALTER USER`, `CREATE USER MAPPING`; GROUP is
// ROLE's old name) up to a `PASSWORD` keyword: not past `;`, nor past another such statement's start,
// so each stretch is read from one start (a run of `ALTER USER ALTER USER ...` is read once).
const SQL_USER_STATEMENT = '(?<!\\w)(?:CREATE|ALTER)\\s+(?:USER|ROLE|GROUP)(?!\\w)';

// The value after a secret key (`key`: its name and separator, group 1), in three forms: quoted (the
// quote in `$2`, its backslashes in `$3`), quoted with JSON's `\u0027` / `\u0022` escape, and bare.
const keyQuotedValue = (key: string): string =>
  `(${key})((?<!\\\\)(${QUOTE_RUN})["'])(?!\\[REDACTED\\]\\2)${quotedBody(2, 3)}`;
// A value opened by the escape `\u0027` or `\u0022` (`$2`, with its backslash run: `\\u0027` one level
// down) runs to the same escape (`$3`), each backslash run read whole with the character after it, or,
// never closed, to a line break or the `"` that ends the JSON string around it (a start never fails after
// its opening, so each character is read once). The quote's escapes stay; what is between them goes.
const keyEscapedQuoteValue = (key: string): string =>
  `(${key})((?<!\\\\)\\\\+u002[27])(?!\\[REDACTED\\])(?:(?!\\2)(?:[^\\\\"\\r\\n]|\\\\+[^\\\\\\r\\n]))+(\\2)?`;
const ESCAPED_QUOTE = /\\u002[27]/i;
// In a bare value, `&` ends it only where a query's next parameter starts (`&user=`, HTML-escaped
// `&amp;user=`): a password holding `&` (`Tr0ub4dor&3`, `ab&amp;cd` in an HTML page, `&#71;` an entity
// inside it) is removed whole, not cut at the `&` with its tail left for the model to read (until
// session 36 it was cut there).
// An `&amp;` or a numeric character reference in it is read whole (its `;` would end the value).
// A reference of a quote or an angle bracket (`&#39;`, `&#x22;`, `&#60;`) ends it, as the character would:
// the value is then read with its quotes decoded.
const VALUE_AMPERSAND =
  '&(?!(?:amp;)?[A-Za-z0-9_.%\\[\\]-]{1,64}=|#(?:0*(?:3[49]|6[02])|[xX]0*(?:2[27]|3[cCeE]));?)(?:amp;|#(?:[xX][0-9A-Fa-f]{1,6}|\\d{1,7});)?';
const keyBareValue = (key: string): string =>
  `(${key})(?!\\[REDACTED\\]|${YAML_INDICATOR_ALONE}|(?:null|true|false|undefined)\\b|(?:OLD_)?PASSWORD\\s*\\(\\s*(?:'|\\\\*")?\\[REDACTED\\]|[a-z][a-z0-9+.-]*:\\/\\/\\[REDACTED\\]@|\\\\+u002[27])(?!\\\\*["'\\s])(?:${bareChar(`\\s&;,'"<>)}\\]`)}|${VALUE_AMPERSAND})+`;
const CAMEL_SECRET_WORD = /[a-z0-9]P(?:[wW][dD]|ass|A[sS])/;

/**
 * Secrets recognised inside any string, whatever its key: private key blocks and bodies (also without
 * their PEM header), password hashes (also the hash field of htpasswd and shadow lines, LDAP's `{SSHA}`),
 * `Authorization` and cookie headers, bearer tokens, JWTs, AWS access key ids (also cut short),
 * well-known provider key shapes (GitHub, GitLab, Slack, Stripe, Google, npm, OpenAI-style `sk-`),
 * credentials in URLs (also a bare token as the userinfo), and values written under a secret-looking
 * key in `key=value`, `key: value`, JSON (`"SECRET_KEY":"..."`), XML (`<password>...</password>`),
 * `.npmrc` (`//host/:_authToken=...`) and connection-string (`AccountKey=...;`) syntax, YAML block
 * scalars (`password: |`), webhook URLs whose path is the secret (Slack, Discord, Teams), `.netrc`
 * entries, `.pgpass` lines (also as a word in a sentence), SQL credential clauses (`PASSWORD '...'`,
 * `IDENTIFIED BY '...'`), a password, token or API key named in prose (`the password is x1y2z3`,
 * `password for bob is x1y2z3`, `api-key abcdef012345`), an `auth` value that looks like a credential
 * (Docker's base64 `user:password`), one-time and card codes under their short names (`otp=123456`,
 * `"cvv":"123"`), and passwords on command
 * lines (`--password x`, the MySQL family's `-px`, sshpass's `-p x`, curl's `-u user:x`, `echo x |
 * sudo -S`; program names
 * in any letter case), also
 * as JSON quoted inside JSON strings at any depth. Each pattern is global; the text around a match is
 * kept. Tuned to leave ordinary text alone: order ids, dates, timestamps, UUIDs, sentences ("Basic
 * plan", "bearer of"), other programs' `-p` and `-u` (`ssh -p 22`, `docker run -u 1000:1000`).
 */
export const SECRET_PATTERNS: readonly SecretPattern[] = [
  {
    name: 'pem-private-key',
    pattern:
      /-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)/g,
    replace: REDACTED,
  },
  // A private key's base64 (DER) body without its PEM header (core's rule takes a whole block): a
  // message cut mid-key, a key pasted into a JSON field. PKCS#8 and PKCS#1 RSA keys open with `MII`
  // (`MIIEvQIBADANBgkqhkiG9w0BAQEFAASC…`, `MIIEpAIBAAKCAQEA…`), EC and Ed25519 keys with `MIGHAgEA…`,
  // `MHcCAQEE…`, `MC4CAQAw…`; certificates and public keys share `MII` and go too. The following lines
  // go with it when each is a whole line of base64. Early, before a path rule (in @toolgate/redact-errors) can cut a
  // `+/a/b` out of it. A match starts only where a base64 run does (or right after a JSON `\\n`), so a 200 KB run is
  // one scan, and each line ends at a break no base64 character can be: no ambiguous split.
  {
    name: 'der-key',
    pattern: new RegExp(
      `(?:(?<![A-Za-z0-9+/])|(?<=\\\\[rn]))(?:MII${B64}{57,}|(?:MIG${B64}AgE[AB]|MHcCAQEE|MC4CAQAw)${B64}{40,})={0,2}(?:${B64_BREAK}${B64}+={0,2}(?=[ \\t]*(?:\\r?\\n|$)|\\\\{1,2}[rn]|\\\\{0,2}["'\`]))*`,
      'g',
    ),
    replace: REDACTED,
    requires: /MI[IG]|MHcCAQEE|MC4CAQAw/,
  },
  // The tail of a key whose BEGIN line was cut off (a message quoting the end of a command's output):
  // the base64 lines right before `-----END … PRIVATE KEY-----` (indented, as in a YAML block, or
  // after JSON's `\\n`), and that line. A match starts only at a run's first line (after no base64
  // character or backslash, nor after one and a line break), so each run is scanned once.
  {
    name: 'der-key',
    pattern: new RegExp(
      `(?=${B64})(?:(?<![A-Za-z0-9+/=\\\\])|(?<=\\\\[rn]))(?<!${B64}={0,2}${B64_BREAK}[ \\t]{0,16})(?:${B64}+={0,2}${B64_BREAK}[ \\t]{0,16})+-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----`,
      'g',
    ),
    replace: REDACTED,
    requires: /PRIVATE KEY/,
  },
  {
    // bcrypt, sha-crypt, MD5-crypt (`$1$`, Apache's `$apr1$`), yescrypt, argon2 and scrypt hashes: a row
    // dump or log line carries them. Also LDAP's `{SSHA}<base64>` (`{SHA}`, `{SSHA512}`, `{MD5}`,
    // `{CRYPT}`, `{PBKDF2-SHA256}`, Dovecot's `{SHA512-CRYPT}`, ...: an htpasswd, `userPassword` or
    // passwd-file value), and Django's
    // `pbkdf2_sha256$<iterations>$<salt>$<hash>`.
    name: 'password-hash',
    pattern: new RegExp(
      `\\$(?:2[abxy]?\\$\\d{2}\\$[./A-Za-z0-9]{53}|[56]\\$(?:rounds=\\d+\\$)?[./A-Za-z0-9]{1,16}\\$[./A-Za-z0-9]{43,86}|(?:1|apr1)\\$[./A-Za-z0-9]{1,8}\\$[./A-Za-z0-9]{22}|g?y\\$[./A-Za-z0-9]+\\$[./A-Za-z0-9]*\\$[./A-Za-z0-9]{43}|7\\$[./A-Za-z0-9]{11,}\\$[./A-Za-z0-9]{43}|argon2(?:id|i|d)\\$(?:v=\\d+\\$)?[^\\s$]+\\$[A-Za-z0-9+/]+\\$[A-Za-z0-9+/]+|scrypt\\$[^\\s$]+\\$[^\\s$]+\\$[^\\s$]+)|\\{(?:${['ssha', 'sha', 'smd5', 'md5', 'crypt', 'pbkdf2', 'argon2', 'bcrypt', 'blf'].map(anyCase).join('|')})(?:-?(?:${anyCase('sha')})?(?:1|224|256|384|512))?(?:-${anyCase('crypt')})?\\}[A-Za-z0-9$][A-Za-z0-9+/.$=,-]{11,}|pbkdf2(?<![A-Za-z0-9_]pbkdf2)_sha(?:1|256|512)\\$\\d+\\$[^\\s$"']+\\$[A-Za-z0-9+/]{20,}={0,2}`,
      'g',
    ),
    replace: REDACTED,
    // Every such hash holds a `$` or a scheme's `}`: ordinary text (ids, e-mails, words, dates) skips it.
    requires: /[$}]/,
  },
  {
    // The hash of an htpasswd or shadow line, at any length (see CRYPT_FIELD): `bob:$apr1$salt$hash`
    // becomes `bob:[REDACTED]`, `root:$6$salt$hash:19000:0:99999:7:::` becomes
    // `root:[REDACTED]:19000:0:99999:7:::`. The line is a word of its own (see PGPASS_WORD_START).
    name: 'password-hash',
    pattern: new RegExp(
      `(${PGPASS_WORD_START}[A-Za-z0-9_][A-Za-z0-9._@-]{0,63}:)${CRYPT_FIELD}(?=[:\\s"'\\\\]|$)`,
      'g',
    ),
    replace: `$1${REDACTED}`,
    requires: /:!*(?:\$[a-z0-9]{1,8}\$|[./A-Za-z0-9]{13}:)/,
  },
  {
    // The whole credential after `Authorization:` (any scheme: Bearer, Basic, token, Digest, ...).
    name: 'authorization-header',
    // The header's name and value may be quoted at any depth of JSON inside JSON strings
    // (`{\"authorization\":\"Bearer x\"}`); the value leaves the escape of its closing quote.
    pattern: new RegExp(
      `\\b((?:proxy-)?authorization(?:(?:${QUOTE_RUN})["'])?[ \\t]*[:=][ \\t]*(?:(?:${QUOTE_RUN})["'])?)(?![\\s"']|[A-Za-z]+[ \\t]+\\[REDACTED\\])((?:Bearer|Basic|Token|Digest|Negotiate|Bot|ApiKey|Key)[ \\t]+(?![ \\t]))?(?!\\[REDACTED\\])${bareChar(`\\s"',;`)}+(?:[ \\t]*,[ \\t]*[a-z]+=(?:"[^"]*"|[^\\s,"]+))*`,
      'gi',
    ),
    replace: `$1$2${REDACTED}`,
  },
  {
    // Everything after a `Cookie:` / `Set-Cookie:` header name, to the end of the line or quote (also
    // one escaped in JSON text, whose backslashes stay).
    name: 'cookie-header',
    pattern: new RegExp(
      `\\b((?:set-)?cookie(?:(?:${QUOTE_RUN})["'])?[ \\t]*:[ \\t]*(?:(?:${QUOTE_RUN})["'])?)(?![\\s"']|\\[REDACTED\\])${bareChar(`\\r\\n"'`)}+`,
      'gi',
    ),
    replace: `$1${REDACTED}`,
  },
  {
    // A `__Host-` / `__Secure-` cookie anywhere (its prefix says it is a session credential). The name is
    // bounded: its characters include `$`, `~` and `+`, after which another `__Host-` may start, and an
    // unbounded name would be scanned to the end of the run again from each (quadratic).
    name: 'cookie-prefixed',
    pattern: new RegExp(
      `(?<![\\w-])(__(?:Host|Secure)-[\\w.!#$%&'*+^\`|~-]{0,256}=)(?!\\[REDACTED\\])${bareChar(`\\s;,"'`)}+`,
      'g',
    ),
    replace: `$1${REDACTED}`,
  },
  {
    // `Bearer <token>` outside a header; at least 8 token characters so "the bearer of it" stays.
    // The separator may be URL-encoded (`Bearer%20...` in a query string).
    name: 'bearer',
    pattern: /\b(Bearer)(?:\s+|%20|\+)(?!\[REDACTED\])[A-Za-z0-9\-._~+/]{8,}=*/gi,
    replace: `$1 ${REDACTED}`,
  },
  {
    // `Basic <base64>` in any common casing, shaped like base64 (a capital, digit or `+/=` after the
    // first character), so "Basic plan" and "basic authentication" stay.
    name: 'basic',
    pattern: /\b(Basic|basic|BASIC)\s+[A-Za-z0-9+/](?=[a-z]*[A-Z0-9+/=])[A-Za-z0-9+/]{7,}={0,2}/g,
    replace: `$1 ${REDACTED}`,
  },
  {
    // Session cookies written outside a Cookie header (a cookie jar dump, a log line).
    name: 'session-cookie',
    pattern: new RegExp(
      `(?<![\\w.-])((?:connect\\.sid|JSESSIONID|PHPSESSID|sessionid|laravel_session)=)(?!\\[REDACTED\\])${bareChar(`\\s;,"'`)}+`,
      'gi',
    ),
    replace: `$1${REDACTED}`,
  },
  {
    // A JWT, after any character but a letter or digit (`id_eyJ…`, `token=eyJ…`: `\b` would not start after
    // `_`, a word character, and a token glued to a name passed). A start after a `-` or `_` that another
    // start earlier in the same run covers is skipped (that one reads through it to the same dot): without
    // it, a run like `eyJx-eyJx-…` or `eyJx_eyJx_…` was scanned to its end again from each `eyJ`
    // (quadratic: 30 s on 160 KB). The nearest earlier start is looked for, so each stretch is read back
    // once. Matches exactly what starting at every such `eyJ` would.
    name: 'jwt',
    pattern:
      /(?<![A-Za-z0-9])eyJ(?<!(?<![A-Za-z0-9])eyJ[A-Za-z0-9_-]*?[-_]eyJ)[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g,
    replace: REDACTED,
  },
  {
    // An access key id with its secret after it (`id:secret`, a credentials line): both go.
    name: 'aws-key-pair',
    pattern: /(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}[:\s,;]+[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])/g,
    replace: REDACTED,
  },
  {
    // 16 characters after the prefix make a full key id; 12 or more is one cut short in a message.
    name: 'aws-access-key-id',
    pattern:
      /(?<![A-Za-z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[0-9A-Z]{12,16}(?![0-9A-Za-z])/g,
    replace: REDACTED,
  },
  {
    name: 'api-key-prefix',
    pattern:
      /(?<![A-Za-z0-9])(?:(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9]{16,}|sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}|xox[abposre]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{20,}|ya29\.[0-9A-Za-z_-]{20,}|glpat-[A-Za-z0-9_-]{16,}|npm_[A-Za-z0-9]{20,}|hf_[A-Za-z0-9]{20,}|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,})/g,
    replace: REDACTED,
  },
  {
    // More providers' key shapes, each behind its fixed prefix: DigitalOcean, Shopify, age, Postman,
    // Square, Grafana, GitLab's other token kinds, HashiCorp Vault, Google OAuth client secrets, PyPI,
    // Databricks, Sentry, Linear, Atlassian, New Relic, Heroku, Supabase, Doppler, Notion, Twilio API
    // keys, Telegram bot tokens, Mailgun, and Azure AD client secrets (`…8Q~…`).
    name: 'api-key-prefix',
    pattern:
      /(?<![A-Za-z0-9])(?:do[opr]_v1_[a-f0-9]{64}|shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}|AGE-SECRET-KEY-1[0-9A-Z]{58}|PMAK-[a-f0-9]{24}-[a-f0-9]{34}|sq0(?:atp|csp)-[0-9A-Za-z_-]{22,}|gl(?:sa|c)_[A-Za-z0-9_=+/-]{20,}|gl(?:oas|rt|dt|ptt|ft|imt|agent|cbt|soat)-[A-Za-z0-9_-]{16,}|hv[sbr]\.[A-Za-z0-9_-]{24,}|GOCSPX-[A-Za-z0-9_-]{20,}|pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{32,}|dapi[a-f0-9]{32}|sntr[yu]s_[A-Za-z0-9+/=_-]{20,}|lin_api_[A-Za-z0-9]{32,}|ATATT3[A-Za-z0-9_=-]{20,}|NRAK-[A-Z0-9]{27}|HRKU-[A-Za-z0-9_-]{20,}|sbp_[a-f0-9]{40}|dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{20,}|ntn_[A-Za-z0-9]{40,}|SK[0-9a-fA-F]{32}|\d{8,10}:AA[0-9A-Za-z_-]{33}|key-[0-9a-f]{32}|[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34})(?![A-Za-z0-9_-])/g,
    replace: REDACTED,
  },
  {
    // Webhook URLs whose path is the secret: Slack's `https://hooks.slack.com/services/T…/B…/<secret>`
    // (also `/workflows/…`, `/triggers/…`): the last part of the path goes, the ids before it stay; also
    // with JSON's escaped slashes (`https:\/\/hooks.slack.com\/services\/…`).
    name: 'webhook-url',
    pattern:
      /((?<![A-Za-z0-9+.-])https?:\\?\/\\?\/hooks\.slack(?:-gov)?\.com\\?\/(?:services|workflows|triggers)\\?\/(?:[A-Za-z0-9_-]+\\?\/)+)(?!\[REDACTED\])[A-Za-z0-9_-]+(?![A-Za-z0-9_-]|\\?\/)/gi,
    replace: `$1${REDACTED}`,
    requires: /hooks\.slack/i,
  },
  {
    // Discord's `https://discord.com/api/webhooks/<id>/<token>` (`discordapp.com`, `ptb.`, `canary.`,
    // `/api/v10/webhooks/`): the token goes, the id stays.
    name: 'webhook-url',
    pattern:
      /((?<![A-Za-z0-9+.-])https?:\\?\/\\?\/(?:(?:ptb|canary)\.)?discord(?:app)?\.com\\?\/api\\?\/(?:v\d+\\?\/)?webhooks\\?\/\d+\\?\/)(?!\[REDACTED\])[A-Za-z0-9_-]+/gi,
    replace: `$1${REDACTED}`,
    requires: /discord/i,
  },
  {
    // Microsoft Teams' incoming webhook, `https://<tenant>.webhook.office.com/webhookb2/<ids>/IncomingWebhook/
    // <secret>/…` (and the older `outlook.office.com/webhook/…`): everything from `webhookb2/` on goes,
    // to a character no such path holds (a space, a quote, `)`, a sentence's last `.`).
    name: 'webhook-url',
    pattern:
      /((?<![A-Za-z0-9+.-])https?:\\?\/\\?\/(?:[A-Za-z0-9-]+\.webhook\.office|outlook\.office(?:365)?)\.com\\?\/webhook(?:b2)?\\?\/)(?!\[REDACTED\])[\w@/%+=~-]+(?:\.[\w@/%+=~-]+)*/gi,
    replace: `$1${REDACTED}`,
    requires: /office/i,
  },
  {
    // `scheme://user:password@host`: the userinfo up to the LAST `@` before the host, so a password
    // holding `@` does not leave its tail behind.
    name: 'url-credentials',
    // The scheme starts where no scheme character precedes it: `\b` would let the engine retry from
    // every character of a long run of them (quadratic on `a.a.a...`).
    pattern: /(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*:\/\/)[^\s:/@]*:[^\s/]*@/gi,
    replace: `$1${REDACTED}@`,
  },
  {
    // A token (no colon) as the userinfo of a URL whose scheme takes credentials:
    // `https://ghp_x@github.com/o/r.git`, `https://x-token-abc@host/path`, `redis://s3cret@cache:6379`,
    // `postgres://app@db/orders` (a user alone goes too). The userinfo ends at the last `@` before the host, never past `/`, `?`, `#` or a
    // quote: `https://example.com/@user` (the `@` in the path), `git@github.com:org/repo` (no scheme),
    // `ssh://git@host` (a user name for ssh) and e-mail addresses stay.
    name: 'url-credentials',
    pattern:
      /(?<![a-z0-9+.-])((?:https?|git|wss?|ftps?|rediss?|amqps?|postgres(?:ql)?|mysql|mongodb(?:\+srv)?):\/\/)(?!\[REDACTED\]@)[^\s:/?#@"'\\<>]+(?:@[^\s:/?#@"'\\<>]+)*@(?=[A-Za-z0-9[])/gi,
    replace: `$1${REDACTED}@`,
  },
  {
    // A `.netrc` entry's password (curl, git, ftp and pip read them): `machine host login bob password x`,
    // `default login anonymous password x`, its tokens on one line or several. Only inside such an entry
    // ("the password is x" in a sentence is `prose-password`'s). Its machine is a host name with a dot
    // (or `default`), or a bare host name (`localhost`, `db01`) with the entry's login before the
    // password; see NETRC_ENTRY for what tells that login from prose. Each token the entry holds before
    // `password` is a keyword (`login`, `account`) and its value, so a run of them is read once from the
    // entry's start.
    name: 'netrc-password',
    pattern: new RegExp(
      `(${NETRC_ENTRY}${NETRC_SPACE}password${NETRC_SPACE})(?!\\[REDACTED\\])${NETRC_VALUE}`,
      'g',
    ),
    replace: `$1${REDACTED}`,
    requires: /password/,
  },
  {
    // A `.pgpass` entry's password (see PGPASS_START): `db.internal:5432:orders:app:x` becomes
    // `db.internal:5432:orders:app:[REDACTED]`; a file's lines as written or in a JSON string.
    name: 'pgpass-password',
    pattern: new RegExp(
      `(${PGPASS_START}${pgpassHostPort(true)}:${PGPASS_NAME}:${PGPASS_NAME}:)(?!\\[REDACTED\\]${PGPASS_END})${PGPASS_CHAR}+${PGPASS_END}`,
      'gm',
    ),
    replace: `$1${REDACTED}`,
    requires: PGPASS_REQUIRES,
  },
  {
    // The same entry as a word inside a sentence: `connect to db.internal:5432:orders:app:x failed`
    // becomes `connect to db.internal:5432:orders:app:[REDACTED] failed` (see PGPASS_WORD_START).
    name: 'pgpass-password',
    pattern: new RegExp(
      `(${PGPASS_WORD_START}${pgpassHostPort(false)}:${PGPASS_NAME}:${PGPASS_NAME}:)(?!\\[REDACTED\\])${PGPASS_WORD_PASSWORD}`,
      'g',
    ),
    replace: `$1${REDACTED}`,
    requires: PGPASS_REQUIRES,
  },
  {
    // The text of an XML element named like a secret key, its tags kept: `<password>x</password>`,
    // `<db:password>x</db:password>`, `<apiKey>x</apiKey>`, `<client_secret type="s">\n  x\n</client_secret>`
    // (a SOAP fault, Maven's or NuGet's settings, an upstream XML error body), a CDATA section
    // (`<password><![CDATA[x]]></password>`), and inside a JSON string, where `</` may be written `<\/`.
    // An empty element (`<password/>`, `<password></password>`, whitespace alone), one holding child
    // elements (`<password><policy>...</policy></password>`: its children are read on their own) and
    // prose (`the <password> field`, no closing tag) stay. `\u003cpassword\u003e` (JSON's escape of
    // `<`) and `&lt;password&gt;` are read with their escapes decoded (see `redactSecretsInText`).
    name: 'xml-secret-element',
    pattern: new RegExp(
      `(<(${XML_SECRET_NAME})(?![\\w.:-])(?:\\s[^<>]*)?(?<!/)>)(?!\\[REDACTED\\]<)(?!\\s*<\\\\*/)${XML_TEXT}(?=<\\\\*/\\2\\s*>)`,
      'gi',
    ),
    replace: `$1${REDACTED}`,
    requires: /<\\*\/[\w.:-]*(?:pass|pwd|pin|sig|_auth|secret|token|key|credential|session)/i,
  },
  {
    // The password literal of a SQL credential clause, its quotes kept (a failed statement echoed in a
    // PostgreSQL or MySQL error, a log line; keywords in any case): PostgreSQL's `PASSWORD 'x'` in a USER
    // or ROLE statement (`ALTER USER app WITH PASSWORD 'x'`, `CREATE ROLE r LOGIN ENCRYPTED PASSWORD 'x'`,
    // `OPTIONS (user 'u', password 'x')` of `CREATE USER MAPPING`).
    name: 'sql-password',
    pattern: new RegExp(
      `(${SQL_USER_STATEMENT}(?:(?!${SQL_USER_STATEMENT})[^;])*?(?<!\\w)PASSWORD\\s+(?:[EN](?=['"]))?)${SQL_LITERAL}`,
      'gi',
    ),
    replace: `$1$2${REDACTED}$3`,
    requires: /password/i,
  },
  {
    // MySQL's `IDENTIFIED BY 'x'`, `IDENTIFIED WITH mysql_native_password BY 'x'`, `IDENTIFIED WITH
    // caching_sha2_password AS '<hash>'`, `IDENTIFIED BY PASSWORD '<hash>'` (Oracle's `IDENTIFIED BY "x"`
    // too). A word after BY (`IDENTIFIED BY the user`, Oracle's unquoted password) is no literal: it stays.
    name: 'sql-password',
    pattern: new RegExp(
      `((?<!\\w)IDENTIFIED\\s+(?:WITH\\s+(?:\\w+|'\\w+'|"\\w+"|\`\\w+\`)\\s+)?(?:BY|AS)\\s+(?:PASSWORD\\s+)?)${SQL_LITERAL}`,
      'gi',
    ),
    replace: `$1$2${REDACTED}$3`,
    requires: /identified/i,
  },
  {
    // MySQL's `SET PASSWORD = 'x'`, `SET PASSWORD FOR root = 'x'`, `SET PASSWORD FOR 'root'@'%' =
    // PASSWORD('x')`. The account runs to the `=`, not past `;`, a line break or another `SET PASSWORD`.
    name: 'sql-password',
    pattern: new RegExp(
      `((?<!\\w)SET\\s+PASSWORD\\s*(?:FOR\\s(?:(?!SET\\s+PASSWORD)[^=;\\r\\n])*)?=\\s*(?:(?:OLD_)?PASSWORD\\s*\\(\\s*)?)${SQL_LITERAL}`,
      'gi',
    ),
    replace: `$1$2${REDACTED}$3`,
    requires: /password/i,
  },
  {
    // MySQL's current password after a new one: `IDENTIFIED BY 'x' REPLACE 'current'`, `SET PASSWORD =
    // 'x' REPLACE 'current'`, read after the new one's redaction.
    name: 'sql-password',
    pattern: new RegExp(`(\\[REDACTED\\](?:'|\\\\*")\\s+REPLACE\\s+)${SQL_LITERAL}`, 'gi'),
    replace: `$1$2${REDACTED}$3`,
    requires: /replace/i,
  },
  {
    // The lines of a YAML block scalar under a secret key: `password: |\n  hunter2\n  more` becomes
    // `password: |\n  [REDACTED]` (the indicator, `|` or `>` with `-`, `+` or a digit, stays); the block
    // is every following line indented more than the key's (blank lines among them).
    name: 'yaml-block-secret',
    pattern: new RegExp(
      `(${YAML_BLOCK})(\\r?\\n(?:[ \\t]*\\r?\\n)*)(\\2[ \\t]+)(?![ \\t]|\\[REDACTED\\][ \\t]*(?:\\r?\\n|$))[^\\r\\n]*(?:(?:\\r?\\n[ \\t]*)*\\r?\\n\\2[ \\t]+[^\\r\\n]*)*`,
      'gim',
    ),
    replace: `$1$3$4${REDACTED}`,
    requires: /:[ \t]*[|>]/,
  },
  {
    // The same inside a JSON string, its line breaks written `\n`: `{"config":"password: |\n  x\n"}`, and
    // in JSON inside a JSON string (`\\n`, an upstream body quoted in an error) and deeper (`\\\\n`): the
    // block's lines are read at the level of the break after the indicator (`$4`).
    name: 'yaml-block-secret',
    pattern: new RegExp(
      `(${YAML_BLOCK_IN_JSON})((\\\\*)\\\\(?:r\\4\\\\)?n(?:${LEVEL.space}*${LEVEL.lineBreak})*)(\\2${LEVEL.space}+)(?!${LEVEL.space}|\\[REDACTED\\]${LEVEL.space}*(?:${LEVEL.lineBreak}|\\\\*"|$))${LEVEL.lineChar}*(?:(?:${LEVEL.lineBreak}${LEVEL.space}*)*${LEVEL.lineBreak}\\2${LEVEL.space}+${LEVEL.lineChar}*)*`,
      'gi',
    ),
    replace: `$1$3$5${REDACTED}`,
    requires: /:(?:[ \t]|\\+t)*[|>]/,
  },
  {
    // `"password": "x y"`, `token='abc'`: the quoted value, quotes kept (JSON stays JSON); also JSON
    // quoted inside a JSON string (an upstream body in an error), `\"password\":\"x y\"`, and that
    // inside another string (a logger's line), `\\\"password\\\":\\\"x y\\\"`: the value runs to its own
    // closing quote, the quotes escaped inside it read as part of it (see quotedBody). One expression for
    // every depth: every string is tested against it once.
    name: 'key-value-secret',
    pattern: new RegExp(keyQuotedValue(SECRET_KEY), 'gi'),
    replace: `$1$2${REDACTED}$2`,
    requires: SECRET_KEY_WORD,
  },
  {
    // A value quoted with JSON's `\u0027` or `\u0022` escape of its quote (.NET's JSON writer escapes both
    // by default): `password=\u0027a b\u0027`, `\\u0027` a level down. The whole value goes, escapes kept.
    name: 'key-value-secret',
    pattern: new RegExp(keyEscapedQuoteValue(SECRET_KEY), 'gi'),
    replace: `$1$2${REDACTED}$3`,
    requires: ESCAPED_QUOTE,
  },
  {
    // `DB_PASSWORD=hunter2`, `AccountKey=abc==;`, `//registry/:_authToken=npm_x`, `password: hunter2`,
    // `password%3Dhunter2` and `%22client_secret%22%3A%22abc%22` (URL-encoded: the value runs to `&`).
    // Inside a JSON string the value leaves the escape of the string's closing quote (`password=x\"`).
    // MySQL's `SET PASSWORD = PASSWORD('[REDACTED]')` and a URL whose userinfo `url-credentials` took
    // (`credentials: https://[REDACTED]@host/x`) stay: the value would stop at the `]`, leaving `]@host`.
    name: 'key-value-secret',
    pattern: new RegExp(keyBareValue(SECRET_KEY), 'gi'),
    replace: `$1${REDACTED}`,
    requires: SECRET_KEY_WORD,
  },
  {
    // The same three forms under a camelCase key whose last word is `Pwd` or `Pass` (`smtpPwd=x`,
    // `"dbPass":"x"`): case-sensitive; a `Pass` holding a flag word or a small number stays (see CAMEL_SECRET_KEY).
    name: 'key-value-secret',
    pattern: new RegExp(keyQuotedValue(CAMEL_SECRET_KEY), 'g'),
    replace: `$1$2${REDACTED}$2`,
    requires: CAMEL_SECRET_WORD,
  },
  {
    name: 'key-value-secret',
    pattern: new RegExp(keyEscapedQuoteValue(CAMEL_SECRET_KEY), 'g'),
    replace: `$1$2${REDACTED}$3`,
    requires: CAMEL_SECRET_WORD,
  },
  {
    name: 'key-value-secret',
    pattern: new RegExp(keyBareValue(CAMEL_SECRET_KEY), 'g'),
    replace: `$1${REDACTED}`,
    requires: CAMEL_SECRET_WORD,
  },
  {
    // A one-time or card code under its short name (see SHORT_CODE_KEY): `otp=123456`, `"cvv":"123"`,
    // `"cvc":123`, `mfa_code: 889911`, `smsOtp=123456`; a value without a digit in its first 65 characters
    // stays (a code is short; the look for it is bounded, so `otp=otp=otp=…` is read once). Quoted, then bare.
    name: 'key-value-secret',
    pattern: new RegExp(
      keyQuotedValue(`${SHORT_CODE_KEY}(?=(?:${QUOTE_RUN})["'][^"'\\\\\\r\\n]{0,64}?\\d)`),
      'g',
    ),
    replace: `$1$2${REDACTED}$2`,
    requires: SHORT_CODE_REQUIRES,
  },
  {
    name: 'key-value-secret',
    pattern: new RegExp(keyBareValue(`${SHORT_CODE_KEY}(?=[^\\s&;,'"<>)}\\]\\\\]{0,64}?\\d)`), 'g'),
    replace: `$1${REDACTED}`,
    requires: SHORT_CODE_REQUIRES,
  },
  {
    // The value of an `auth` key when it looks like a credential (see AUTH_KEY): Docker's
    // `{"auths":{"registry.example.com":{"auth":"[REDACTED]"}}}`, `auth=[REDACTED]`, `X_AUTH: [REDACTED]`;
    // `auth=none`, `"auth":"basic"` and `auth: required` stay. A quoted value keeps its quotes.
    name: 'auth-credential',
    pattern: new RegExp(`(${AUTH_KEY})${AUTH_VALUE}`, 'g'),
    replace: `$1${REDACTED}`,
    requires: /auth(?:\\*["']|%22)?[ \t]*(?:[=:]|%3[AaDd])/i,
  },
  {
    // A command line's long option whose value is its next word: `mysql --password hunter2`,
    // `vault login --token s.abc`, `--client-secret "a b"`, as `Command failed: ...` and `ps` print them,
    // and NUL-separated as `/proc/<pid>/cmdline` holds them. The option's name ends in a secret word, as
    // a key's does. A quoted value keeps its quotes; a next word starting with `-` is the next option
    // (`--password` alone prompts).
    name: 'cli-option-secret',
    pattern: new RegExp(
      `(${SECRET_OPTION})${OPEN_QUOTE}(?!\\[REDACTED\\]\\2)(?:(?!\\2)[^\\r\\n\\0])*\\2`,
      'gi',
    ),
    replace: `$1$2${REDACTED}$2`,
    requires: SECRET_KEY_WORD,
  },
  {
    name: 'cli-option-secret',
    pattern: new RegExp(`(${SECRET_OPTION})(?![-\\s\\0'"]|\\[REDACTED\\])${BARE}+`, 'gi'),
    replace: `$1${REDACTED}`,
    requires: SECRET_KEY_WORD,
  },
  {
    // The same option and its value as items of a printed argument list: `[ 'mysql', '--password', 'x' ]`
    // (util.inspect, as loggers print a spawn error's `spawnargs`, also over its line breaks) and
    // `["--password","x"]` (its JSON). The item's quotes stay, so the list stays balanced.
    name: 'cli-option-secret',
    pattern: new RegExp(`(${printedItem(`--[A-Za-z0-9_.-]*${SECRET_KEY_SUFFIX}`)})${PRINTED_VALUE}`, 'gi'),
    replace: `$1$3${REDACTED}$3`,
    requires: /["']--/,
  },
  {
    // The MySQL family's password attached to `-p`: `mysql -phunter2 -u root`, `mysqldump -ps3cret db`,
    // `mariadb -p'a b'`, separated by spaces, tabs or NULs (/proc/<pid>/cmdline), or quoted (`'-pX'` of
    // a printed argument list). Only after such a program's name on the same command line: elsewhere
    // `-p` is a port (`ssh -p 22`) or a flag (`cp -p`, `tar -cpf`). `-p` alone prompts, `-P` is the port.
    name: 'mysql-password-option',
    pattern: new RegExp(`(${MYSQL_PROGRAM}${commandRest(MYSQL_PROGRAM)}[ \\t\\0'"]-p)${OPTION_VALUE}`, 'g'),
    replace: `$1$2${REDACTED}$2`,
    requires: /mysql|mariadb/i,
  },
  {
    // A later `-p` on the same command line (`mysql -pa -pb`): the one above takes the first, this one
    // the last (a third between them is left).
    name: 'mysql-password-option',
    pattern: new RegExp(
      `(${MYSQL_PROGRAM}${commandRest(MYSQL_PROGRAM, true)}[ \\t\\0'"]-p)${OPTION_VALUE}`,
      'g',
    ),
    replace: `$1$2${REDACTED}$2`,
    requires: /mysql|mariadb/i,
  },
  {
    // A MySQL-family `-pX` as an item of a printed argument list, also with an item per line as
    // `util.inspect` prints a long list (`spawnargs: [\n 'mysql',\n '-h',\n 'db',\n '-pX'\n ]`): up to the
    // list's end. The item's quotes stay; an escaped quote inside it is part of the value.
    name: 'mysql-password-option',
    pattern: new RegExp(
      `(${MYSQL_PROGRAM}${listRest(MYSQL_PROGRAM)}((?<!\\\\)(${QUOTE_RUN})["'])-p)(?!\\[REDACTED\\]\\2)${quotedBody(2, 3, '+')}`,
      'g',
    ),
    replace: `$1${REDACTED}$2`,
    requires: /mysql|mariadb/i,
  },
  {
    // sshpass's password, attached or as the next word: `sshpass -p hunter2 ssh host`, `sshpass -phunter2`.
    // Only among sshpass's own options (`-v`, `-P prompt`), before the command it runs: that command's
    // `-p` (`ssh -p 22`) is its own.
    name: 'sshpass-password',
    pattern: new RegExp(
      `((?<![A-Za-z0-9_.-])${anyCase('sshpass')}(?:${EXE})?(?:[ \\t\\0]+-(?:v|P[ \\t\\0]*[^\\s\\0]+))*[ \\t\\0]+-p[ \\t\\0]*)${OPTION_VALUE}`,
      'g',
    ),
    replace: `$1$2${REDACTED}$2`,
    requires: /sshpass/i,
  },
  {
    // sshpass's password as items of a printed argument list (`[ 'sshpass', '-p', 'x', 'ssh', 'host' ]`,
    // `["sshpass","-px"]`, an item per line as `util.inspect` prints a long list), after its `-v` items.
    // Its path may be a Windows one (`["C:\\Tools\\SSHPASS.EXE","-p","x"]`). A spawn error printed names
    // the program in `path` and its arguments without it in the `spawnargs` after it (`path:
    // '/usr/bin/sshpass',\n  spawnargs: [ '-p', 'x' ]`, `"path":"sshpass","spawnargs":["-p","x"]`).
    name: 'sshpass-password',
    pattern: new RegExp(
      `(((?<!\\\\)(${QUOTE_RUN})["'])(?:[^'"\\s\\]]*[/\\\\])?${anyCase('sshpass')}(?:${EXE})?\\2,\\s*(?:(?:\\2)?spawnargs(?:\\2)?:\\s*\\[\\s*)?(?:\\2-v\\2,\\s*)*\\2-p(?:\\2,\\s*\\2)?)(?!\\[REDACTED\\]\\2|-)${quotedBody(2, 3, '+')}`,
      'g',
    ),
    replace: `$1${REDACTED}$2`,
    requires: /sshpass/i,
  },
  {
    // curl's `-u admin:s3cret` (`--user`), `-U u:p` (`--proxy-user`), also after its silent/fail/follow
    // flags (`-su admin:s3cret`), and HTTPie's `-a user:pass`: the user name stays. Only after a curl,
    // wget or http(s) program name on the same command line, because elsewhere `-u` is a user (`mysql -u
    // root`, which has no colon) or `uid:gid` (`docker run -u 1000:1000`, left alone).
    name: 'cli-user-password',
    pattern: new RegExp(
      `(${CURL_PROGRAM}${commandRest(CURL_PROGRAM)}[ \\t\\0'"]-(?:[fsSLkvi]*[uU]|a)[ \\t\\0]*)${USER_PASSWORD}`,
      'g',
    ),
    replace: `$1$2$3$4:${REDACTED}$2`,
    requires: /curl|wget|http/i,
  },
  {
    // The same as items of a printed argument list: `[ 'curl', '-u', 'admin:x' ]`, `["curl","-u","a:x"]`,
    // also with an item per line, as `util.inspect` prints a long list.
    name: 'cli-user-password',
    pattern: new RegExp(
      `(${CURL_PROGRAM}${listRest(CURL_PROGRAM)}${printedItem('-(?:[fsSLkvi]*[uU]|a)')})${PRINTED_USER_PASSWORD}`,
      'g',
    ),
    replace: `$1$3$5:${REDACTED}$3`,
    requires: /curl|wget|http/i,
  },
  {
    // A printed list that starts with `-u`/`-U`: a program's arguments without its name, as Node's spawn
    // errors print `spawnargs` (`[ '-u', 'admin:x', 'https://host' ]`, the program in `path`).
    name: 'cli-user-password',
    pattern: new RegExp(`(\\[\\s*${printedItem('-[uU]')})${PRINTED_USER_PASSWORD}`, 'g'),
    replace: `$1$3$5:${REDACTED}$3`,
    requires: /-[uU]/,
  },
  {
    // `--user admin:s3cret`, `--user=admin:s3cret`, `--proxy-user u:p`, `--auth u:p` after any program:
    // these long names take `user:password` in curl, wget, HTTPie and their kin. `docker run --user
    // 1000:1000` loses its gid to this (harmless); a value without a colon (`--user ann`) stays. The
    // option starts a word: one inside another's value (`--user=--user=...`) is no second start that
    // reads the rest of the word again.
    name: 'cli-user-password',
    pattern: new RegExp(`((?<![^\\s\\0'"])--(?:proxy-user|user|auth)(?:=|[ \\t\\0]+))${USER_PASSWORD}`, 'g'),
    replace: `$1$2$3$4:${REDACTED}$2`,
    requires: /--(?:proxy-user|user|auth)/,
  },
  {
    // The same as items of a printed argument list: `[ '--user', 'admin:x' ]`, `["--proxy-user","u:x"]`.
    name: 'cli-user-password',
    pattern: new RegExp(`(${printedItem('--(?:proxy-user|user|auth)')})${PRINTED_USER_PASSWORD}`, 'g'),
    replace: `$1$3$5:${REDACTED}$3`,
    requires: /--(?:proxy-user|user|auth)/,
  },
  {
    // The password fed to sudo's stdin: `echo hunter2 | sudo -S apt update`, `echo -n 'p w' | sudo -S id`,
    // `printf '%s\n' 'hunter2' | sudo -kS id` (a printf format holding `%` stays). A quoted value keeps
    // its quotes; a variable (`echo "$PASS"`) stays.
    name: 'sudo-stdin-password',
    pattern: new RegExp(
      `((?<![A-Za-z0-9_.-])(?:echo(?:[ \\t]+-[neE]+)*|printf(?:[ \\t]+[^\\s|;&%]*%[^\\s|;&]*)?)[ \\t]+)(?:${OPEN_QUOTE}(?!\\[REDACTED\\]\\2|\\$[A-Za-z_{])(?:(?!\\2)[^\\r\\n])+\\2|(?!\\[REDACTED\\]|\\$[A-Za-z_{])${ECHO_WORD}(?:[ \\t]+${ECHO_WORD})*)([ \\t]*\\|[ \\t]*${SUDO_STDIN})`,
      'g',
    ),
    replace: `$1$2${REDACTED}$2$3`,
    requires: /sudo/,
  },
  {
    // A here-string on sudo's stdin: `sudo -S <<< 'hunter2' id`, `sudo -S id <<< hunter2`.
    name: 'sudo-stdin-password',
    pattern: new RegExp(
      `(${SUDO_STDIN}(?:(?!<<<|(?<![A-Za-z0-9_.-])sudo)[^\\r\\n|;&])*<<<[ \\t]*)${OPTION_VALUE}`,
      'g',
    ),
    replace: `$1$2${REDACTED}$2`,
    requires: /<<</,
  },
  {
    // A password named in prose, read last: `the password is hunter2`, `passphrase was 'p@ssw0rd'`,
    // `passwd s3cret!x`, `password S3cretPw`, `the token is abc123`, `Password for bob is S3cretPw`, `password
    // for 'bob': S3cretPw9` (see PROSE_SECRET for what the value must look like, PROSE_USER for the user). A
    // value in quotes keeps them.
    name: 'prose-password',
    pattern: new RegExp(
      `(${PROSE_KEYWORD}(?:pass(?:word|phrase)|passwd|token)[ \\t]+(?:${PROSE_USER}|(?:is|was)[ \\t]+)|${PROSE_KEYWORD}(?:pass(?:word|phrase)|passwd)[ \\t]+)(['"\`]?)${PROSE_SECRET}\\2`,
      'gi',
    ),
    replace: `$1$2${REDACTED}$2`,
    requires: /passw(?:or)?d[ \t]|passphrase[ \t]|token[ \t]/i,
  },
  {
    // A token named in prose: `invalid token 3f9a2c81d0e94b7f5a61`, `refresh token eyJ...` (see
    // PROSE_TOKEN): 16 token characters or more, a letter and a digit among them.
    name: 'prose-password',
    pattern: new RegExp(`(${PROSE_KEYWORD}token[ \\t]+)(?!\\[REDACTED\\])${PROSE_TOKEN}`, 'gi'),
    replace: `$1${REDACTED}`,
    requires: /token[ \t]/i,
  },
  {
    // An API key named in prose: `api-key abcdef0123456789`, `API key is k3y0123456789`, `invalid api key
    // 'abc123def456'`: 12 token characters or more holding a letter and a digit, so `api key missing`
    // and `api-key header required` stay. A value in quotes keeps them.
    name: 'prose-password',
    pattern: new RegExp(
      `((?<![A-Za-z0-9])api[ _-]?key[ \\t]+(?:(?:is|was)[ \\t]+)?)(['"\`]?)(?!\\[REDACTED\\]|${WORDS_NAME})${proseToken(12)}\\2`,
      'gi',
    ),
    replace: `$1$2${REDACTED}$2`,
    requires: /api[ _-]?key[ \t]/i,
  },
];

export interface RedactSecretsOptions {
  /** Key-name fragments whose values are always replaced. @default DEFAULT_SECRET_KEYS */
  keys?: readonly string[];
  /** Value patterns replaced inside every string, and found across sibling strings. @default SECRET_PATTERNS */
  patterns?: readonly SecretPattern[];
  /** Deepest level walked; deeper values become `[Truncated]`. @default 32 */
  maxDepth?: number;
  /**
   * Redacts one string (values, keys) in place of `redactSecretsInText(text, patterns)`: for a caller
   * that also decodes or counts. Called once for each string of the copy. `patterns` still find a
   * secret split across sibling strings. @default redactSecretsInText over `patterns`
   */
  redactText?: (text: string) => string;
  /**
   * Decides each object entry in place of the key rule: a string replaces the value wholesale,
   * undefined leaves it to the name/value rule (a value field of an object whose name field names a
   * secret becomes `[REDACTED]`), then walks it. @default values under `keys` (and `WHOLE_SECRET_KEYS`)
   * become `[REDACTED]`
   */
  replaceEntry?: (key: string, value: unknown, parent: object) => string | undefined;
  /** Told the name of each pattern that matched across sibling strings. @default undefined */
  onSplitSecret?: (name: string) => void;
}

/**
 * Replaces secret patterns inside one string. Text whose characters are written as escapes (JSON's
 * `\u0070assword`, Go's `\u003cpassword\u003e`, an HTML body's `password&#61;x` or
 * `&quot;token&quot;:&quot;x&quot;`) is read once more with those escapes decoded (see
 * `decodeEscapedCharacters`): when the patterns find something there, the text is returned with only
 * what they replaced changed: every escape outside it stays as written (`&lt;!-- note --&gt;` and
 * `\u0060` stay escaped beside a redacted `\u0070assword=[REDACTED]`), and what a pattern keeps of its
 * match (a key before `[REDACTED]`, a quote after it) keeps its escapes. Decoded, that text is exactly
 * the decoded text redacted; where it could not be written so, the decoded text redacted is returned.
 * Otherwise the text as the first pass left it, byte for byte.
 */
export function redactSecretsInText(
  text: string,
  patterns: readonly SecretPattern[] = SECRET_PATTERNS,
): string {
  const out = applyPatterns(text, patterns);
  // Text without such an escape (nearly all) costs this one test.
  if (!ESCAPED_CHARACTER.test(out)) return out;
  const decoded = decodeEscapedCharacters(out);
  if (decoded === out) return out;
  // The patterns over the decoded text. Only once one changes it is each change also traced: for each
  // character of the redacted text, the decoded character it was copied from (-1 for a replacement's
  // own characters), so the rest can be written as `out` wrote it.
  let trace: Int32Array | undefined;
  let traced = true;
  const redacted = applyPatterns(decoded, patterns, (before, after, pattern, replace) => {
    if (!traced) return;
    const step = traceReplace(before, trace ?? identityTrace(before.length), pattern, replace);
    // A replacement read otherwise than `String.prototype.replace` reads it: the decoded text.
    if (step === undefined || step.text !== after) traced = false;
    else trace = step.trace;
  });
  if (redacted === decoded) return out;
  if (!traced || trace === undefined) return redacted;
  const encoded = reencode(out, decoded, redacted, trace);
  // Decoded, the text returned shows exactly what the decoded redaction shows, never more.
  return encoded !== undefined && decodeEscapedCharacters(encoded) === redacted ? encoded : redacted;
}

/** A pattern's `requires` holds for `text` (a caller's may be global or sticky: read from the start). */
function meetsRequires(requires: RegExp | undefined, text: string): boolean {
  if (requires === undefined) return true;
  requires.lastIndex = 0;
  return requires.test(text);
}

/** `text` with each pattern applied in turn; `changed` sees each pattern that changed it, and how. */
function applyPatterns(
  text: string,
  patterns: readonly SecretPattern[],
  changed?: (before: string, after: string, pattern: RegExp, replace: string) => void,
): string {
  let out = text;
  for (const { pattern, replace, requires } of patterns) {
    if (!meetsRequires(requires, out)) continue;
    pattern.lastIndex = 0;
    const next = out.replace(pattern, replace);
    if (changed !== undefined && next !== out) changed(out, next, pattern, replace);
    out = next;
  }
  return out;
}

/**
 * True for text that may hold a printable ASCII character written as an escape `redactSecretsInText`
 * decodes: a JSON `\u0020`-`\u007e` escape, or an HTML numeric or named character reference
 * (`&#61;`, `&#x3D;`, `&lt;`, `&quot;`, `&equals;`). No secret pattern matches `\u0070assword=x`, so a
 * caller that skips `redactSecretsInText` for text no pattern matches (a combined pre-test) must not
 * skip text this matches.
 */
export const ESCAPED_CHARACTER: RegExp = /\\u00[2-7]|&(?:#|[A-Za-z]{2,31};|lt|gt|amp|quot|LT|GT|AMP|QUOT)/;

// The escapes decoded, in one pass: a JSON `\uXXXX` after its backslash run (read from the run's start
// only, so a long run is read once), and an HTML character reference: decimal or hex (`;` optional, as
// browsers read them; leading zeros skipped, as they do: `&#00000119;` is `w`), named, or one of the
// legacy names browsers read without `;` (`&ltpassword&gt` is `<password>`; session 36's red team found
// both read as written, the secret behind them unrecognised).
const ESCAPED_CHARACTERS =
  /(?<!\\)(\\+)u00([2-7][0-9A-Fa-f])|&(?:#(?:[xX]0*([0-9A-Fa-f]{1,6})|0*(\d{1,7}));?|([A-Za-z]{2,31});|(lt|gt|amp|quot|LT|GT|AMP|QUOT))/g;

// HTML's named references of printable ASCII characters (names are case-sensitive: `&Lt;` is `≪`).
const NAMED_ASCII: ReadonlyMap<string, string> = new Map(
  Object.entries({
    quot: '"',
    QUOT: '"',
    amp: '&',
    AMP: '&',
    lt: '<',
    LT: '<',
    gt: '>',
    GT: '>',
    apos: "'",
    equals: '=',
    colon: ':',
    sol: '/',
    commat: '@',
    num: '#',
    excl: '!',
    dollar: '$',
    percnt: '%',
    lpar: '(',
    rpar: ')',
    ast: '*',
    midast: '*',
    plus: '+',
    comma: ',',
    period: '.',
    semi: ';',
    quest: '?',
    lsqb: '[',
    lbrack: '[',
    rsqb: ']',
    rbrack: ']',
    lcub: '{',
    lbrace: '{',
    rcub: '}',
    rbrace: '}',
    verbar: '|',
    vert: '|',
    VerticalLine: '|',
    lowbar: '_',
    UnderBar: '_',
    grave: '`',
    DiacriticalGrave: '`',
    Hat: '^',
  }),
);

/**
 * `text` with the escapes of printable ASCII characters decoded, in one pass (`&amp;lt;` becomes
 * `&lt;`, not `<`): what a model reads in them.
 * - JSON's `\u0070` (hex in any case) becomes `p`; `\\u0070` too (JSON inside a JSON string escapes
 *   the escape's backslash, and so on: a run of 2^n backslashes before `u` is the escape n levels down,
 *   any backslashes before those are escaped backslashes and stay). A quote stays escaped, in JSON's
 *   short form at its level (`\u0022` becomes `\"`, `\\u0022` becomes `\\\"`), so JSON stays JSON
 *   and the patterns read it as the quote it is; a backslash and control characters (`\u005c`,
 *   `\u000a`, `\u007f`) stay as written, and so does anything past ASCII (`caf\u00e9`).
 * - An HTML reference of a printable ASCII character (`&#61;`, `&#x3D;`, `&lt;`, `&equals;`, ...)
 *   becomes the character, but for a backslash (`&#92;`, which would escape what follows in JSON)
 *   and control characters (`&#10;`). A quote (`&quot;`, `&#34;`) becomes `"` in text without a quote
 *   of its own, and `\"` in text that holds one (an HTML body inside a JSON string, where a bare `"`
 *   would end the string): the patterns read either as a quote.
 */
function decodeEscapedCharacters(text: string): string {
  const quote = text.includes('"') ? '\\"' : '"';
  return text.replace(
    ESCAPED_CHARACTERS,
    (
      written: string,
      slashes: string | undefined,
      json: string | undefined,
      hex: string | undefined,
      decimal: string | undefined,
      name: string | undefined,
      legacy: string | undefined,
    ) => decodeEscape(quote, written, slashes, json, hex, decimal, name ?? legacy),
  );
}

/** One match of ESCAPED_CHARACTERS decoded (see `decodeEscapedCharacters`); `quote` is what `"` becomes. */
function decodeEscape(
  quote: string,
  written: string,
  slashes: string | undefined,
  json: string | undefined,
  hex: string | undefined,
  decimal: string | undefined,
  name: string | undefined,
): string {
  if (slashes !== undefined) {
    const code = Number.parseInt(json ?? '', 16);
    if (code === 0x5c || code === 0x7f) return written;
    // The escape's own backslashes: the run's lowest power of two (its level); those before it stay.
    const own = slashes.length & -slashes.length;
    // A quote n levels down is written with 2^(n+1) - 1 backslashes before it (`\"`, `\\\"`); past
    // the five levels the patterns read (QUOTE_RUN), it stays as written.
    if (code === 0x22 && own > 16) return written;
    const char = code === 0x22 ? `${'\\'.repeat(2 * own - 1)}"` : String.fromCharCode(code);
    return slashes.slice(own) + char;
  }
  let char: string | undefined;
  if (name !== undefined) char = NAMED_ASCII.get(name);
  else {
    const code = hex !== undefined ? Number.parseInt(hex, 16) : Number.parseInt(decimal ?? '', 10);
    if (code >= 0x20 && code < 0x7f && code !== 0x5c) char = String.fromCharCode(code);
  }
  if (char === undefined) return written;
  return char === '"' ? quote : char;
}

/**
 * `decodeEscapedCharacters(text)` with, for each of its characters, the span `[starts[i], ends[i])` of
 * `text` it was decoded from: a character written as itself (also a backslash an escape's run keeps)
 * has its own one-character span; the characters one escape becomes (`p`, or a quote's `\"`) share the
 * escape's span. Spans are in order and cover `text`, and no two escapes share a start.
 */
function decodeWithSpans(text: string): { text: string; starts: Int32Array; ends: Int32Array } {
  const quote = text.includes('"') ? '\\"' : '"';
  const parts: string[] = [];
  const starts: number[] = [];
  const ends: number[] = [];
  const asWritten = (from: number, to: number): void => {
    for (let at = from; at < to; at += 1) {
      starts.push(at);
      ends.push(at + 1);
    }
  };
  let at = 0;
  for (const match of text.matchAll(ESCAPED_CHARACTERS)) {
    const [written, slashes, json, hex, decimal, name, legacy] = match;
    const start = match.index;
    const end = start + written.length;
    asWritten(at, start);
    parts.push(text.slice(at, start));
    const char = decodeEscape(quote, written, slashes, json, hex, decimal, name ?? legacy);
    parts.push(char);
    if (char === written) asWritten(start, end);
    else {
      // The backslashes before the escape's own run are characters of the text, kept as written.
      const kept = slashes === undefined ? 0 : slashes.length - (slashes.length & -slashes.length);
      asWritten(start, start + kept);
      for (let i = kept; i < char.length; i += 1) {
        starts.push(start + kept);
        ends.push(end);
      }
    }
    at = end;
  }
  asWritten(at, text.length);
  parts.push(text.slice(at));
  return { text: parts.join(''), starts: Int32Array.from(starts), ends: Int32Array.from(ends) };
}

function identityTrace(length: number): Int32Array {
  const trace = new Int32Array(length);
  for (let i = 0; i < length; i += 1) trace[i] = i;
  return trace;
}

// Each pattern's expression with match indices (`d`), for `traceReplace`: made once, on first use.
const INDEXED_PATTERNS = new WeakMap<RegExp, RegExp>();

function indexedPattern(pattern: RegExp): RegExp {
  let indexed = INDEXED_PATTERNS.get(pattern);
  if (indexed === undefined) {
    indexed = new RegExp(pattern.source, pattern.hasIndices ? pattern.flags : `${pattern.flags}d`);
    INDEXED_PATTERNS.set(pattern, indexed);
  }
  return indexed;
}

/**
 * `text.replace(pattern, replace)` (with `pattern.lastIndex` at 0), traced: `trace` gives for each
 * character of `text` where it came from (see `redactSecretsInText`), and the result's trace gives the
 * same for each character of the result. What `replace` copies of the match (`$&`, `$1`, `$<name>`,
 * `` $` ``, `$'`) keeps its trace; its own characters get -1. `replace` is expanded by ECMAScript's
 * GetSubstitution rules. Undefined for a `replace` that is not a string.
 */
function traceReplace(
  text: string,
  trace: Int32Array,
  pattern: RegExp,
  replace: unknown,
): { text: string; trace: Int32Array } | undefined {
  if (typeof replace !== 'string') return undefined;
  const indexed = indexedPattern(pattern);
  indexed.lastIndex = 0;
  let matches: Iterable<RegExpExecArray>;
  if (indexed.global) matches = text.matchAll(indexed);
  else {
    const match = indexed.exec(text);
    matches = match === null ? [] : [match];
  }
  const parts: string[] = [];
  const traces: number[] = [];
  const copy = (from: number, to: number): void => {
    if (to <= from) return;
    parts.push(text.slice(from, to));
    for (let i = from; i < to; i += 1) traces.push(trace[i]!);
  };
  const literal = (chars: string): void => {
    parts.push(chars);
    for (let i = 0; i < chars.length; i += 1) traces.push(-1);
  };
  let at = 0;
  for (const match of matches) {
    const position = match.index;
    const matchEnd = position + match[0].length;
    copy(at, position);
    at = matchEnd;
    const indices = match.indices;
    if (indices === undefined) return undefined;
    const captures = match.length - 1;
    let i = 0;
    while (i < replace.length) {
      const dollar = replace.indexOf('$', i);
      if (dollar === -1 || dollar === replace.length - 1) {
        literal(replace.slice(i));
        break;
      }
      if (dollar > i) literal(replace.slice(i, dollar));
      const next = replace[dollar + 1]!;
      i = dollar + 2;
      if (next === '$') literal('$');
      else if (next === '&') copy(position, matchEnd);
      else if (next === '`') copy(0, position);
      else if (next === "'") copy(Math.min(matchEnd, text.length), text.length);
      else if (next >= '0' && next <= '9') {
        const second = replace[dollar + 2];
        let digits = second !== undefined && second >= '0' && second <= '9' ? 2 : 1;
        let index = Number(replace.slice(dollar + 1, dollar + 1 + digits));
        if (index > captures && digits === 2) {
          digits = 1;
          index = Number(next);
        }
        i = dollar + 1 + digits;
        if (index >= 1 && index <= captures) {
          const span = indices[index];
          if (span !== undefined) copy(span[0], span[1]);
        } else literal(replace.slice(dollar, i));
      } else if (next === '<') {
        const close = replace.indexOf('>', dollar);
        if (close === -1 || match.groups === undefined) literal('$<');
        else {
          const span = indices.groups?.[replace.slice(dollar + 2, close)];
          if (span !== undefined) copy(span[0], span[1]);
          i = close + 1;
        }
      } else {
        literal('$');
        i = dollar + 1;
      }
    }
  }
  copy(at, text.length);
  return { text: parts.join(''), trace: Int32Array.from(traces) };
}

/**
 * `redacted` written with `out`'s escapes: each run of characters copied in order from `decoded` (see
 * `traceReplace`) is written as `out` wrote the escapes they were decoded from, each escape once; a
 * replacement's own characters, and those of an escape only part of which a run holds, as they are.
 * Undefined when `decoded` is not what `out` decodes to.
 */
function reencode(out: string, decoded: string, redacted: string, trace: Int32Array): string | undefined {
  const spans = decodeWithSpans(out);
  if (spans.text !== decoded) return undefined;
  const { starts, ends } = spans;
  const parts: string[] = [];
  // A stretch of `out` still to be written, [from, to).
  let from = 0;
  let to = 0;
  const flush = (): void => {
    if (to > from) parts.push(out.slice(from, to));
    from = to = 0;
  };
  const write = (start: number, end: number): void => {
    if (to > from && start === to) to = end;
    else {
      flush();
      from = start;
      to = end;
    }
  };
  let k = 0;
  while (k < redacted.length) {
    const first = trace[k]!;
    if (first < 0) {
      flush();
      parts.push(redacted[k]!);
      k += 1;
      continue;
    }
    // The run of decoded characters [first, last) copied in order.
    let last = first + 1;
    k += 1;
    while (k < redacted.length && trace[k] === last) {
      last += 1;
      k += 1;
    }
    let i = first;
    while (i < last) {
      const start = starts[i]!;
      let spanEnd = i + 1;
      while (spanEnd < decoded.length && starts[spanEnd] === start) spanEnd += 1;
      if ((i === 0 || starts[i - 1] !== start) && spanEnd <= last) {
        write(start, ends[i]!);
        i = spanEnd;
      } else {
        // Part of an escape's characters: as decoded.
        const partEnd = Math.min(spanEnd, last);
        flush();
        parts.push(decoded.slice(i, partEnd));
        i = partEnd;
      }
    }
  }
  flush();
  return parts.join('');
}

/**
 * Short key names that hold a secret only as the whole name (as substrings they are in `shipping`,
 * `passenger`, `author`, `design`): matched after the same normalisation, whatever `keys` says.
 */
export const WHOLE_SECRET_KEYS: readonly string[] = [
  'pwd',
  'pass',
  'pin',
  'auth',
  'sig',
  'otp',
  'totp',
  'cvv',
  'cvc',
  'cvv2',
  'cvc2',
];

// Between two words of a key: `-`, `_`, `.` or spaces, or a lower-case letter or digit before a capital.
const WORD_BREAK = /[-_.\s]+|(?<=[a-z0-9])(?=[A-Z])/;
const LAST_WORD_SECRETS = new Set(WHOLE_SECRET_KEYS.filter((name) => name !== 'auth'));

/**
 * Whether a key name holds a secret: `keys` fragments (default `DEFAULT_SECRET_KEYS`) matched as
 * substrings, and `WHOLE_SECRET_KEYS` as the whole name, after folding compatibility forms (full-width
 * `ＰＡＳＳＷＯＲＤ`), lower-casing and removing `-`, `_`, `.` and spaces, so `X-Api-Key`, `db_password`
 * and `PIN` match. The one rule every package uses for secret-looking keys.
 */
export function createSecretKeyMatcher(
  keys: readonly string[] = DEFAULT_SECRET_KEYS,
): (key: string) => boolean {
  const fragments = keys.map(normaliseKey);
  const whole = new Set(WHOLE_SECRET_KEYS);
  return (key) => {
    const normal = normaliseKey(key);
    if (whole.has(normal) || fragments.some((fragment) => normal.includes(fragment))) return true;
    // A short name as the last word of a longer one: `DB_PASS`, `smtpPass`, `card.pin` (`auth` only
    // whole: `require_auth` is a flag).
    const last = key.split(WORD_BREAK).at(-1);
    return last !== undefined && last.length < key.length && LAST_WORD_SECRETS.has(normaliseKey(last));
  };
}

// Name/value pairs: a secret's name held as data beside its value, as Kubernetes (`{ name: 'DB_PASSWORD',
// value: 'x' }`), HAR and fetch header lists (`{ name: 'Authorization', value: 'x' }`), AWS SSM and
// CloudFormation (`{ Name: '/prod/db/password', Value: 'x' }`, `{ ParameterKey, ParameterValue }`) and
// Postman (`{ key, value }`) write them. Both lists are compared after `normaliseKey`.
const NAME_FIELD_KEYS: ReadonlySet<string> = new Set([
  'name',
  'key',
  'keyname',
  'header',
  'headername',
  'field',
  'fieldname',
  'variable',
  'variablename',
  'var',
  'varname',
  'param',
  'paramname',
  'parameter',
  'parametername',
  'parameterkey',
  'attribute',
  'attributename',
  'property',
  'propertyname',
  'setting',
  'settingname',
]);
const VALUE_FIELD_KEYS: ReadonlySet<string> = new Set([
  'value',
  'values',
  'val',
  'data',
  'secret',
  'secretvalue',
  'secretstring',
  'secretbinary',
  'parametervalue',
  'stringvalue',
  'currentvalue',
  'initialvalue',
]);
// What a name in a pair looks like: a key name or a path, not prose (`{ name: 'Reset password' }` is
// a menu's label, not a setting's name).
const PAIR_NAME = /^[^\s]{1,256}$/;
// A header's name in a flat array of names and values (Node's `rawHeaders`, a Map's entries): an HTTP
// field-name token that starts with a letter or digit (so `--password-file` is no header).
const HEADER_NAME = /^[A-Za-z0-9][A-Za-z0-9!#$%&'*+.^_`|~-]{0,127}$/;
// A header that holds a credential under a one-word name; any other needs a `-` in its name to read as
// a header (`X-Api-Key`, `Private-Token`, `Set-Cookie`), so a list of words (`['token', 'expired']`) stays.
const ONE_WORD_SECRET_HEADERS: ReadonlySet<string> = new Set(['authorization', 'cookie', 'apikey']);

/**
 * Whether `key` names the entry that holds a name/value pair's name (`name`, `Name`, `key`, `header`,
 * `ParameterKey`, ...; compared like a secret key name, ignoring case, `-`, `_`, `.` and spaces). A
 * writer that skips `createSecretRedactor`'s walk (audit's JSON writer) checks an object holding such a
 * key with `createSecretPairTests(keys).isSecretPair`.
 */
export function isNameFieldKey(key: string): boolean {
  return key.length <= 32 && NAME_FIELD_KEYS.has(normaliseKey(key));
}

// The first letter of every value field's name (or a character normalising may fold or drop): most
// keys are told apart without normalising them.
const VALUE_FIELD_START = /^(?:[vdspci]|[\u0080-\uffff])/i;

function isValueFieldKey(key: string): boolean {
  return key.length <= 32 && VALUE_FIELD_START.test(key) && VALUE_FIELD_KEYS.has(normaliseKey(key));
}

/** The name/value rules of `createSecretRedactor`, for a writer that must agree with its walk. */
export interface SecretPairTests {
  /** Whether a string names a secret: a key name `keys` match, or a path (`/prod/db/pass`) whose last segment is one. */
  isSecretName(name: string): boolean;
  /**
   * Whether a header's name in an array of names and values is a secret's: a secret key name written
   * with a `-` (`X-Api-Key`, `Proxy-Authorization`, `Set-Cookie`) or `Authorization`, `Cookie`, `apikey`.
   */
  isSecretHeader(name: string): boolean;
  /**
   * Whether an object is a name/value pair naming a secret: it holds a name field (`isNameFieldKey`)
   * whose string is a secret's name, and a value field (`value`, `Value`, `data`, `SecretString`,
   * `ParameterValue`, ...) that is not null: its value fields are redacted.
   */
  isSecretPair(record: object): boolean;
  /**
   * Whether an array reads as header names and values (Node's `rawHeaders`: `['Authorization', 'x',
   * 'Host', 'y']`, a Map's entry `['Cookie', 'x']`) with a secret header among the names: an even number
   * of strings, every even item a header's name; the item after a secret header's name is redacted.
   */
  hasSecretHeaderPair(items: readonly unknown[]): boolean;
}

/** The name/value rules over the key matcher of `keys` (default `DEFAULT_SECRET_KEYS`). */
export function createSecretPairTests(keys?: readonly string[]): SecretPairTests {
  const isSecretKey = createSecretKeyMatcher(keys);
  const isSecretName = (name: string): boolean => {
    if (!PAIR_NAME.test(name)) return false;
    if (isSecretKey(name)) return true;
    const slash = name.lastIndexOf('/');
    return slash >= 0 && slash < name.length - 1 && isSecretKey(name.slice(slash + 1));
  };
  const isSecretHeader = (name: string): boolean =>
    (name.includes('-') || ONE_WORD_SECRET_HEADERS.has(name.toLowerCase())) && isSecretKey(name);
  const namesSecret = (record: Record<string, unknown>): boolean => {
    for (const key of Object.keys(record)) {
      if (!isNameFieldKey(key)) continue;
      const name = record[key];
      if (typeof name === 'string' && isSecretName(name)) return true;
    }
    return false;
  };
  return {
    isSecretName,
    isSecretHeader,
    isSecretPair: (record) => {
      const entries = record as Record<string, unknown>;
      if (!namesSecret(entries)) return false;
      for (const key of Object.keys(entries)) {
        const entry = entries[key];
        if (entry !== null && entry !== undefined && isValueFieldKey(key)) return true;
      }
      return false;
    },
    hasSecretHeaderPair: (items) => secretHeaderIndexes(items, isSecretHeader) !== undefined,
  };
}

/** The indexes of the values after secret header names in an array of header names and values, if any. */
function secretHeaderIndexes(
  items: readonly unknown[],
  isSecretHeader: (name: string) => boolean,
): number[] | undefined {
  if (items.length === 0 || items.length % 2 !== 0) return undefined;
  for (let index = 0; index < items.length; index += 1) {
    const item = items[index];
    if (typeof item !== 'string') return undefined;
    if (index % 2 === 0 && !HEADER_NAME.test(item)) return undefined;
  }
  const found: number[] = [];
  for (let index = 0; index < items.length; index += 2) {
    if (isSecretHeader(items[index] as string)) found.push(index + 1);
  }
  return found.length === 0 ? undefined : found;
}

/**
 * A copy of `value` with secrets replaced: values under secret-looking keys wholesale, and secret
 * patterns inside every string, object keys included, through nested objects and arrays ({@link mapStrings}: `__proto__` stays
 * a key, cycles and depth bounded, dates and errors turned into strings). A secret split over sibling
 * strings (a private key's lines as an array's items or an object's values, `Bearer` and its token in
 * two items) goes too: see `redactSplitSecrets`. So does a secret named beside its value: the value
 * fields of `{ name: 'DB_PASSWORD', value: 'x' }` (see `createSecretPairTests`), the item after a secret
 * header's name in an array of header names and values (`rawHeaders`). The input is not changed.
 */
export function createSecretRedactor(options: RedactSecretsOptions = {}): (value: unknown) => unknown {
  const patterns = (options.patterns ?? SECRET_PATTERNS).map(globalPattern);
  const redactText = options.redactText ?? ((text: string): string => redactSecretsInText(text, patterns));
  let keyRule = options.replaceEntry;
  if (keyRule === undefined) {
    const isSecretKey = createSecretKeyMatcher(options.keys);
    keyRule = (key, item) => (isSecretKey(key) && item !== null && item !== undefined ? REDACTED : undefined);
  }
  const onSplit = options.onSplitSecret;
  const pairs = createSecretPairTests(options.keys);
  const headers = (items: readonly unknown[]): number[] | undefined =>
    secretHeaderIndexes(items, pairs.isSecretHeader);
  // Per call, whether each object read so far is a secret's name/value pair: an object's value fields
  // (at most a few) ask once, however its keys are spelled.
  let pairVerdicts: WeakMap<object, boolean> | undefined;
  const isSecretPair = (parent: object): boolean => {
    pairVerdicts ??= new WeakMap();
    let verdict = pairVerdicts.get(parent);
    if (verdict === undefined) {
      verdict = pairs.isSecretPair(parent);
      pairVerdicts.set(parent, verdict);
    }
    return verdict;
  };
  const rule = keyRule;
  // The key rule (or the caller's), then the name/value rule: a value field of an object whose name
  // field names a secret (`{ name: 'DB_PASSWORD', value: 'x' }`) goes as `{ DB_PASSWORD: 'x' }` would.
  const replaceEntry = (key: string, item: unknown, parent: object): string | undefined => {
    const replaced = rule(key, item, parent);
    if (replaced !== undefined || item === null || item === undefined) return replaced;
    if (!isValueFieldKey(key) || !isSecretPair(parent)) return undefined;
    onSplit?.(NAME_VALUE_SECRET);
    return REDACTED;
  };
  const maxDepth = options.maxDepth ?? 32;
  // A key is a string the reader sees too: a URL with credentials used as a key must not survive.
  const walkOptions: MapStringsOptions = { maxDepth, replaceEntry, mapKey: redactText };
  // The command-line patterns among `patterns`: their rules also read argument arrays.
  const names = new Set(patterns.map((pattern) => pattern.name));
  return (value) => {
    pairVerdicts = undefined;
    if (typeof value !== 'object' || value === null || !hasSplitOpener(value, maxDepth, headers)) {
      return mapStrings(value, redactText, walkOptions);
    }
    // Rare: a plain copy first (read once), its split secrets cut, then the copy redacted as usual.
    const copy = mapStrings(value, (text) => text, { maxDepth });
    cutSplitSecrets(copy, patterns, names, onSplit, headers);
    return mapStrings(copy, redactText, walkOptions);
  };
}

/** `createSecretRedactor()` with the defaults, applied once. */
export function redactSecrets(value: unknown, options?: RedactSecretsOptions): unknown {
  return createSecretRedactor(options)(value);
}

// Characters nothing draws: format characters (zero-width space and joiners, word joiner, BOM, soft
// hyphen, bidi marks) and the other default-ignorable code points (combining grapheme joiner, variation
// selectors, Hangul fillers).
const INVISIBLE = /[\p{Cf}\p{Default_Ignorable_Code_Point}]/gu;

function normaliseKey(key: string): string {
  // NFKC only when a character outside ASCII could fold (full-width letters): keys are mostly ASCII.
  // Invisible characters go too: `pass\u200bword` and `pass\u034fword` read as `password`.
  const folded = /[\u0080-\uffff]/.test(key) ? key.normalize('NFKC').replace(INVISIBLE, '') : key;
  return folded.toLowerCase().replace(/[-_.\s]/g, '');
}

// Sibling strings: an array's string items, or an object's string values, in order. Each is scrubbed on
// its own, so a secret whose pieces sit in two siblings (a PEM key's lines in `_meta.lines`) would keep
// all but its first piece. Patterns that read across a line break can join such pieces: a private key
// block, `Bearer`/`Basic` and the token after it, an AWS key id and its secret. A run is joined with
// line breaks and scanned only when one of its strings opens such a secret (a cheap test), so plain
// arrays cost that test per string and nothing more. A command's argument array is read item by item
// instead (see `cutArgvSecrets`): joined, a value with spaces would be cut at its first space.
const JOINED_SECRET_OPENER =
  /-----(?:BEGIN|END) |(?<![A-Za-z0-9+/])(?:MII|MIG|MHcCAQEE|MC4CAQAw)[A-Za-z0-9+/]{20}|\b(?:[Bb]earer|BEARER|[Bb]asic|BASIC)[ \t]*$|(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}[ \t:,;]*$/;
// Whole arguments after which the next one may be a secret: a long option named like a secret key
// (`--password`, `--client-secret`; not `--password-file`, `--max-tokens`), `--user`, `--proxy-user`,
// `--auth`, a bare `-u`/`-U` (an array of a program's arguments without its name, as Node's `spawnargs`),
// and the programs whose short options carry passwords (`sshpass`, `curl`, `mysql`, also as a path, in
// any letter case: `C:\Tools\SSHPASS.EXE`, `MYSQL`).
const ARGV_SECRET_OPTION = `--[A-Za-z0-9_.-]*${SECRET_KEY_SUFFIX}`;
const ARGV_PROGRAM = /(?<![^/\\])(?:(sshpass)|(curl|wget|https?)|(mysql|mariadb)[A-Za-z0-9_-]*)(?:\.exe)?$/i;
const ARGV_OPENER = `^(?:${ARGV_SECRET_OPTION}|--(?:proxy-user|user|auth)|-u)$|${ARGV_PROGRAM.source}`;

/**
 * True for a string that may open (or close) a secret split over sibling strings: a private key's
 * BEGIN or END line or the first line of its body, `Bearer`/`Basic` at a string's end, an AWS key id
 * at a string's end; and a command-line argument that may take a secret as the next one (`--password`,
 * `--user`, `-u`, `sshpass`, `curl`, `mysql`: see `cutArgvSecrets`). Case-insensitive. A redactor that
 * skips `createSecretRedactor`'s walk for speed (audit's JSON writer) hands any value holding such a
 * string to that walk instead.
 */
export const SPLIT_SECRET_OPENER: RegExp = new RegExp(`${JOINED_SECRET_OPENER.source}|${ARGV_OPENER}`, 'i');

/** Whether a run of sibling strings in `value` (at any depth) holds a string that may open a split secret. */
function hasSplitOpener(
  value: object,
  maxDepth: number,
  headers: (items: readonly unknown[]) => number[] | undefined,
): boolean {
  // Created at the first nested object: a flat value (most arguments) allocates nothing here.
  let seen: Set<object> | undefined;
  const visit = (node: object, depth: number): boolean => {
    if (depth >= maxDepth) return false;
    if (depth > 0) {
      seen ??= new Set();
      if (seen.has(node)) return false;
      seen.add(node);
    }
    const entries = Array.isArray(node) ? node : plainValues(node);
    // Something the plain walk does not read (a Map, a class instance): the copy decides.
    if (entries === undefined) return true;
    if (entries !== node && isSpawnErrorArgs(node as Record<string, unknown>)) return true;
    if (entries === node && headers(entries) !== undefined) return true;
    let strings = 0;
    let opener = false;
    for (const entry of entries) {
      if (typeof entry === 'string') {
        strings += 1;
        if (!opener && SPLIT_SECRET_OPENER.test(entry)) opener = true;
      } else if (typeof entry === 'object' && entry !== null && visit(entry, depth + 1)) return true;
    }
    return opener && strings >= 2;
  };
  try {
    return visit(value, 0);
  } catch {
    // A throwing getter or proxy: the copy (which turns it into `[Unreadable]`) decides.
    return true;
  }
}

/** A plain object's values; undefined for anything else but a date, an error or bytes (one string each). */
function plainValues(node: object): unknown[] | undefined {
  const prototype = Object.getPrototypeOf(node);
  if (prototype === Object.prototype || prototype === null) return Object.values(node);
  if (
    node instanceof Date ||
    node instanceof Error ||
    ArrayBuffer.isView(node) ||
    node instanceof ArrayBuffer
  ) {
    return [];
  }
  return undefined;
}

/** Cuts split secrets out of a plain copy (`mapStrings` output), in place, at any depth. */
function cutSplitSecrets(
  node: unknown,
  patterns: readonly SecretPattern[],
  names: ReadonlySet<string>,
  onSplit: ((name: string) => void) | undefined,
  headers: (items: readonly unknown[]) => number[] | undefined,
): void {
  if (typeof node !== 'object' || node === null) return;
  const keys = Array.isArray(node) ? node.map((_, index) => index) : Object.keys(node);
  const record = node as Record<string | number, unknown>;
  const run: (string | number)[] = [];
  for (const key of keys) {
    const entry = record[key];
    if (typeof entry === 'string') run.push(key);
    else cutSplitSecrets(entry, patterns, names, onSplit, headers);
  }
  if (!Array.isArray(node)) cutSpawnErrorArgs(record, names, onSplit);
  else cutHeaderValues(node, headers(node), onSplit);
  if (run.length < 2) return;
  if (!run.some((key) => SPLIT_SECRET_OPENER.test(record[key] as string))) return;
  if (Array.isArray(node)) cutArgvSecrets(node, names, onSplit);
  const items = run.map((key) => record[key] as string);
  if (!items.some((item) => JOINED_SECRET_OPENER.test(item))) return;
  const cut = redactSplitSecrets(items, patterns, onSplit);
  for (const [index, key] of run.entries()) {
    if (cut[index] === items[index]) continue;
    // defineProperty: a "__proto__" key of the copy stays a key.
    Object.defineProperty(node, key, {
      value: cut[index],
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
}

// An argument array's options whose value is the next argument or attached (`-pX`), by program.
const ARGV_SECRET_NAME = new RegExp(`^${ARGV_SECRET_OPTION}$`, 'i');
const ARGV_USER_OPTION = /^--(?:proxy-user|user|auth)$/;
const CURL_USER_OPTION = /^-(?:[fsSLkvi]*[uU]|a)(.*)$/;
const SSHPASS_PASSWORD = /^-p(.*)$/;
const MYSQL_PASSWORD = /^-p(.+)$/;

/**
 * A command's argument array (`['mysql', '--password', 'x']`, a spawn error's `spawnargs`), its secrets
 * cut in place, by the rules of the command-line patterns in `names`: the argument after a long option
 * named like a secret key (`cli-option-secret`; one starting with `-` is the next option), the password
 * of `user:password` after `--user`, `--proxy-user`, `--auth`, and after curl's `-u`/`-U` (also attached,
 * `-uadmin:x`; HTTPie's `-a`) after a `curl`, `wget` or `http` item, or in an array that starts with an
 * option (a program's arguments without its name: Node's `spawnargs` leave it out) (`cli-user-password`),
 * sshpass's `-p`, next or attached, among its own options (`sshpass-password`), and every `-pX` after a
 * MySQL-family item (`mysql-password-option`). Each value is the whole argument, spaces and all.
 */
function cutArgvSecrets(
  items: unknown[],
  names: ReadonlySet<string>,
  onSplit: ((name: string) => void) | undefined,
): void {
  const first = items[0];
  // What the options read so far belong to: `args` for an array of options without a program's name.
  let program: 'sshpass' | 'curl' | 'mysql' | 'args' | undefined =
    typeof first === 'string' && first.startsWith('-') ? 'args' : undefined;
  const cut = (index: number, text: string, name: string): void => {
    items[index] = text;
    onSplit?.(name);
  };
  for (let index = 0; index < items.length; index += 1) {
    const item = items[index];
    if (typeof item !== 'string') continue;
    const next = items[index + 1];
    const value = typeof next === 'string' && next !== REDACTED ? next : undefined;
    const found = ARGV_PROGRAM.exec(item);
    if (found !== null) {
      program = found[1] !== undefined ? 'sshpass' : found[2] !== undefined ? 'curl' : 'mysql';
      continue;
    }
    if (ARGV_SECRET_NAME.test(item)) {
      if (value === undefined || value === '' || value.startsWith('-')) continue;
      if (names.has('cli-option-secret')) cut(index + 1, REDACTED, 'cli-option-secret');
      index += 1;
      continue;
    }
    const attachedUser = program === 'curl' ? CURL_USER_OPTION.exec(item) : null;
    const userOption =
      attachedUser !== null ||
      ARGV_USER_OPTION.test(item) ||
      (program === 'args' && (item === '-u' || item === '-U'));
    if (userOption && names.has('cli-user-password')) {
      // `-uadmin:x`: the user and password attached. A value without a colon is a user alone.
      const attached = attachedUser?.[1] ?? '';
      if (attached !== '') {
        const redacted = withoutPassword(attached);
        if (redacted !== attached)
          cut(index, `${item.slice(0, -attached.length)}${redacted}`, 'cli-user-password');
      } else if (value !== undefined && withoutPassword(value) !== value) {
        cut(index + 1, withoutPassword(value), 'cli-user-password');
        index += 1;
      }
      continue;
    }
    if (program === 'sshpass') {
      const password = SSHPASS_PASSWORD.exec(item);
      if (password !== null && names.has('sshpass-password')) {
        if (password[1] !== '') {
          if (password[1] !== REDACTED) cut(index, `-p${REDACTED}`, 'sshpass-password');
        } else if (value !== undefined) {
          cut(index + 1, REDACTED, 'sshpass-password');
          index += 1;
        }
      } else if (item === '-P') {
        // The prompt to wait for is its own argument.
        index += 1;
      } else if (!item.startsWith('-')) {
        // The command sshpass runs: its `-p` (`ssh -p 22`) is its own.
        program = undefined;
      }
      continue;
    }
    if (program === 'mysql' && names.has('mysql-password-option')) {
      const password = MYSQL_PASSWORD.exec(item);
      if (password !== null && password[1] !== REDACTED) cut(index, `-p${REDACTED}`, 'mysql-password-option');
    }
  }
}

/** What `onSplitSecret` is told for a value cut by its name beside it (a name/value pair, a header's value). */
const NAME_VALUE_SECRET = 'name-value-secret';

/** The values after secret header names (`indexes`) in an array of header names and values, cut in place. */
function cutHeaderValues(
  items: unknown[],
  indexes: readonly number[] | undefined,
  onSplit: ((name: string) => void) | undefined,
): void {
  if (indexes === undefined) return;
  for (const index of indexes) {
    if (items[index] === REDACTED) continue;
    items[index] = REDACTED;
    onSplit?.(NAME_VALUE_SECRET);
  }
}

/** Whether a plain object holds a spawn error's `path` (one of the programs `cutArgvSecrets` reads) and `spawnargs`. */
function isSpawnErrorArgs(record: Record<string, unknown>): boolean {
  const { path, spawnargs } = record;
  return typeof path === 'string' && Array.isArray(spawnargs) && ARGV_PROGRAM.test(path);
}

/**
 * A spawn error's fields copied into a plain object (`{ ...error }`, its JSON parsed back): Node names the
 * program in `path` and leaves it out of `spawnargs` (`spawn mysql ENOENT`: `path: 'mysql'`,
 * `spawnargs: ['-phunter2']`), so the arguments are read as that program's (`cutArgvSecrets`), in place.
 */
function cutSpawnErrorArgs(
  record: Record<string, unknown>,
  names: ReadonlySet<string>,
  onSplit: ((name: string) => void) | undefined,
): void {
  if (!isSpawnErrorArgs(record)) return;
  const spawnargs = record.spawnargs as unknown[];
  const argv: unknown[] = [record.path, ...spawnargs];
  cutArgvSecrets(argv, names, onSplit);
  for (let index = 0; index < spawnargs.length; index += 1) spawnargs[index] = argv[index + 1];
}

/** `user:password` with what follows the first colon redacted; text without a colon as it is. */
function withoutPassword(text: string): string {
  const colon = text.indexOf(':');
  if (colon < 0 || text.slice(colon + 1) === REDACTED || colon === text.length - 1) return text;
  return `${text.slice(0, colon + 1)}${REDACTED}`;
}

/**
 * Sibling strings with each secret that spans two or more of them cut out: the run is joined with line
 * breaks, every pattern is matched over the joined text, and what a match that crosses a join would
 * replace is replaced in each string it covers (a private key's BEGIN line, body lines and END line
 * each become `[REDACTED]`; text before BEGIN and after END stays). A match inside one string is left
 * to that string's own redaction. A key block without its END line runs to the last string.
 */
function redactSplitSecrets(
  items: readonly string[],
  // Global already (createSecretRedactor made them so once): matchAll needs the flag.
  patterns: readonly SecretPattern[],
  onSplit: ((name: string) => void) | undefined,
): string[] {
  const joined = items.join('\n');
  const starts: number[] = [];
  let offset = 0;
  for (const item of items) {
    starts.push(offset);
    offset += item.length + 1;
  }
  const cuts: { from: number; to: number; text: string }[] = [];
  for (const { name, pattern, replace } of patterns) {
    // matchAll starts its copy where the pattern's lastIndex stands.
    pattern.lastIndex = 0;
    for (const match of joined.matchAll(pattern)) {
      const from = match.index;
      const to = from + match[0].length;
      // Crosses a join: some string starts after the match's start and at or before its end.
      const next = starts.find((start) => start > from);
      if (next === undefined || next > to) continue;
      const replaced = expandReplacement(replace, match);
      let head = 0;
      const most = Math.min(match[0].length, replaced.length);
      while (head < most && match[0][head] === replaced[head]) head += 1;
      let tail = 0;
      while (
        tail < most - head &&
        match[0][match[0].length - 1 - tail] === replaced[replaced.length - 1 - tail]
      ) {
        tail += 1;
      }
      if (head === match[0].length && head === replaced.length) continue;
      cuts.push({
        from: from + head,
        to: to - tail,
        text: replaced.slice(head, replaced.length - tail).trim(),
      });
      onSplit?.(name);
    }
  }
  if (cuts.length === 0) return [...items];
  // Overlapping matches (a key block and its body's own rule) make one cut, shown by the first's text.
  cuts.sort((a, b) => a.from - b.from || b.to - a.to);
  const merged: typeof cuts = [];
  for (const cut of cuts) {
    const last = merged.at(-1);
    if (last !== undefined && cut.from < last.to) last.to = Math.max(last.to, cut.to);
    else merged.push({ ...cut });
  }
  return items.map((item, index) => {
    const start = starts[index] ?? 0;
    const end = start + item.length;
    let out = '';
    let at = start;
    for (const cut of merged) {
      if (cut.to <= at || cut.from >= end) continue;
      const from = Math.max(cut.from, at);
      out += joined.slice(at, from) + cut.text;
      at = Math.min(cut.to, end);
    }
    return at === start ? item : out + joined.slice(at, end);
  });
}

/** A replacement string (`$1`, `$&`, `$<name>`, `$$`) filled in from a match. */
function expandReplacement(replace: string, match: RegExpMatchArray): string {
  return replace.replace(/\$(?:(\$)|(&)|(\d{1,2})|<([^>]*)>)/g, (token, dollar, whole, group, name) => {
    if (dollar !== undefined) return '$';
    if (whole !== undefined) return match[0];
    if (group !== undefined) {
      const index = Number(group);
      return index > 0 && index < match.length ? (match[index] ?? '') : token;
    }
    return match.groups?.[name] ?? '';
  });
}

function globalPattern(pattern: SecretPattern): SecretPattern {
  const { requires } = pattern;
  // `requires` is only ever tested: a global or sticky one would carry lastIndex from text to text.
  const stateless =
    requires === undefined || !(requires.global || requires.sticky)
      ? requires
      : new RegExp(requires.source, requires.flags.replace(/[gy]/g, ''));
  if (pattern.pattern.global && stateless === requires) return pattern;
  return {
    ...pattern,
    pattern: pattern.pattern.global
      ? pattern.pattern
      : new RegExp(pattern.pattern.source, `${pattern.pattern.flags}g`),
    ...(stateless === undefined ? {} : { requires: stateless }),
  };
}
