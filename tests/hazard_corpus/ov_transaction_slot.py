# expect: order-violation scenario=two_units_of_work
# A connection keeps "the current transaction" in one slot; two units of work interleave and
# the first commits the second's transaction (write, other's overwrite, read back).
import asyncio


class Transaction:
    def __init__(self, name):
        self.name = name
        self.committed = False

    def commit(self):
        if self.committed:
            raise RuntimeError(f"transaction {self.name} already committed")
        self.committed = True


class Connection:
    def __init__(self):
        self.tx = None

    async def unit_of_work(self, name):
        self.tx = Transaction(name)  # race
        await asyncio.sleep(0)  # the statements
        self.tx.commit()  # race


async def two_units_of_work():
    conn = Connection()
    await asyncio.gather(conn.unit_of_work("a"), conn.unit_of_work("b"))
