const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** A table name checked and quoted once: `name` or `schema.name`, plain identifiers only. */
export interface AuditTableName {
  readonly schema: string | undefined;
  /** The quoted, qualified name, for SQL text and `to_regclass`. */
  readonly sql: string;
}

/** Checks and quotes an audit table name; throws on anything but plain identifiers. */
export function parseTableName(name: string): AuditTableName {
  const parts = name.split('.');
  if (parts.length > 2 || !parts.every((part) => IDENTIFIER.test(part))) {
    throw new TypeError(
      `audit table name ${JSON.stringify(name)}: use name or schema.name (letters, digits, _)`,
    );
  }
  return {
    schema: parts.length === 2 ? parts[0] : undefined,
    sql: parts.map((part) => `"${part}"`).join('.'),
  };
}
