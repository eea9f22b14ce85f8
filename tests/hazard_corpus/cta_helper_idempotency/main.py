# expect: check-then-act scenario=client_retry
# A payment API with idempotency keys (payments.py): a client and its retry both pass the
# key check before either stored the response, and the card is charged twice.
import asyncio

from payments import PaymentService

replies = []


async def client(svc, attempt):
    replies.append((attempt, await svc.pay("order-42", "visa-1", 25)))


async def client_retry():
    replies.clear()
    svc = PaymentService()
    await asyncio.gather(client(svc, 1), client(svc, 2))
    assert len(svc.charges) == 1, f"charged {len(svc.charges)} times: {replies}"
