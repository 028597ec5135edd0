/**
 * MySQL/MariaDB driver errors are told apart by their number, not their text: ER_DATA_TOO_LONG (1406) is a value
 * over the column (LimitError, 413), anything else an outage (StoreUnavailableError). No server is needed: the
 * store's connection and statements are replaced by a stub that fails like mysql2 does.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MysqlConfigStore } from '../../src/stores/mysql.js';
import { LimitError, StoreUnavailableError } from '../../src/core/errors.js';

/** A mysql2 query error: `code`, `errno` and `sqlMessage` as the driver sets them. */
function driverError(errno: number, code: string, message: string): Error {
  return Object.assign(new Error(message), { errno, code, sqlMessage: message, sqlState: '22001' });
}

class StubbedStore extends MysqlConfigStore {
  constructor(private readonly failure: Error) {
    super('db', { host: '127.0.0.1' }, 'mariadb');
  }
  protected async connect(): Promise<void> {}
  protected async writeRows(): Promise<void> {
    throw this.failure;
  }
  protected async disconnect(): Promise<void> {}
}

const write = (failure: Error) => new StubbedStore(failure).set([{ set: '', key: 'A', value: 'x' }]);

test('errno 1406 (ER_DATA_TOO_LONG) is a LimitError naming the store, whatever the text', async () => {
  for (const message of ["Data too long for column 'value' at row 1", 'Données trop longues pour la colonne']) {
    await assert.rejects(write(driverError(1406, 'ER_DATA_TOO_LONG', message)), (e: unknown) => {
      assert.ok(e instanceof LimitError);
      assert.equal(e.message, 'a value is too long for store "db" (a mariadb TEXT column holds at most 65,535 bytes)');
      return true;
    });
  }
});

test('the same text with another errno is an outage, not a limit', async () => {
  await assert.rejects(write(driverError(1105, 'ER_UNKNOWN_ERROR', "Data too long for column 'value' at row 1")), (e: unknown) => {
    assert.ok(e instanceof StoreUnavailableError);
    assert.equal(e.message, `store "db" is unavailable: Data too long for column 'value' at row 1`);
    return true;
  });
});
