"""pitlane.aio.Client end to end against the real server (issue 16): unary calls, errors,
StreamStates as an async iterator, Drive as an async context manager, tokens (the owner
token of a session the client created), and many sessions stepped concurrently from one
event loop."""

import asyncio
import contextlib

import grpc
import pytest

import pitlane
import pitlane.aio
from conftest import running_token_server


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 60))


@contextlib.asynccontextmanager
async def new_session(address, name):
    """(client, session id) of a new session on a new client; both closed after."""
    async with pitlane.aio.Client(address, timeout_s=10.0) as sim:
        sid = (await sim.create_session(name=name)).session_id
        try:
            yield sim, sid
        finally:
            await sim.delete_session(sid)


def test_unary_calls_and_errors(address):
    async def main():
        async with pitlane.aio.Client(address, timeout_s=10.0) as sim:
            info = await sim.create_session(name="aio", tick_rate_hz=50.0)
            sid = info.session_id
            try:
                car = await sim.spawn_vehicle(sid, speed_mps=5.0)
                assert await sim.add_obstacle(sid, center_x_m=100.0, center_y_m=0.0, length_m=1.0,
                                             width_m=1.0) >= 1
                await sim.set_controls(sid, {car: (0.0, 0.0)})
                state = await sim.step(sid, ticks=50)  # One second at 5 m/s.
                assert state.time.tick == 50
                assert state.vehicles[0].x_m == pytest.approx(5.0, abs=1e-9)
                assert (await sim.get_state(sid)).time.tick == 50
                assert sid in {s.session_id for s in await sim.list_sessions()}
                assert (await sim.step_with_events(sid, ticks=2)).state.time.tick == 52
                with pytest.raises(grpc.aio.AioRpcError) as failed:
                    await sim.step(sid, ticks=1, expected_tick=7)
                assert failed.value.code() == grpc.StatusCode.ABORTED
                with pytest.raises(grpc.aio.AioRpcError) as missing:
                    await sim.get_state("s-" + "a" * 26)
                assert missing.value.code() == grpc.StatusCode.NOT_FOUND
                assert (await sim.reset_session(sid)).time.tick == 0
            finally:
                await sim.delete_session(sid)

    run(main())


def test_stream_states_is_an_async_iterator(address):
    async def main():
        async with new_session(address, "aio-stream") as (sim, sid):
            await sim.spawn_vehicle(sid)
            ticks = []
            async def read():
                async for message in sim.stream_states(sid):
                    ticks.append(message.state.time.tick)
                    if len(ticks) == 4:
                        return
            reader = asyncio.create_task(read())
            while not ticks:  # The first message is the current state.
                await asyncio.sleep(0.01)
            for _ in range(3):
                await sim.step(sid, ticks=1)
            await reader
            assert ticks == [0, 1, 2, 3]

    run(main())


def test_drive_is_an_async_context_manager(address):
    async def main():
        async with new_session(address, "aio-drive") as (sim, sid):
            car = await sim.spawn_vehicle(sid)
            async with sim.drive(sid, car) as driver:
                for tick in range(5):
                    observation = await driver.observe()
                    assert observation.time.tick == tick
                    await driver.send(tick, acceleration_mps2=2.0)
                    await asyncio.sleep(0.05)  # The control reaches the session first.
                    await sim.step(sid, ticks=1)
                last = await driver.latest()
                assert last.time.tick == 5
            # 2 m/s² over five ticks of 0.02 s: 0.2 m/s (0.16 if the first control landed
            # after the first step).
            speed = (await sim.get_state(sid)).vehicles[0].speed_mps
            assert 4 * 2.0 / 50 - 1e-9 <= speed <= 5 * 2.0 / 50 + 1e-9, speed
            with pytest.raises(ValueError):
                sim.drive(sid, car, on_disconnect="explode")

    run(main())


def test_many_sessions_step_concurrently_from_one_loop(address):
    async def main():
        async with pitlane.aio.Client(address, timeout_s=10.0) as sim:
            ids = [(await sim.create_session(name=f"aio-{i}")).session_id for i in range(8)]
            await asyncio.gather(*(sim.spawn_vehicle(sid, speed_mps=1.0) for sid in ids))
            states = await asyncio.gather(*(sim.step(sid, ticks=10 + i)
                                            for i, sid in enumerate(ids)))
            assert [s.time.tick for s in states] == [10 + i for i in range(8)]
            await asyncio.gather(*(sim.delete_session(sid) for sid in ids))

    run(main())


def test_tokens_and_the_owner_token_of_created_sessions(tmp_path):
    with running_token_server(tmp_path) as (server, admin_token, _):
        async def main():
            # Without a token: refused.
            async with pitlane.aio.Client(server.address, timeout_s=10.0) as anonymous:
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await anonymous.list_sessions()
                assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            async with pitlane.aio.Client(server.address, token=admin_token) as admin:
                sid = (await admin.create_session(name="team")).session_id
                other = (await admin.create_session(name="other")).session_id
                team_token, _ = admin.owner_tokens[sid]
            # A team's client (the owner token of its session) creates another session: it
            # keeps that one's owner token and uses it where its own token may not act.
            async with pitlane.aio.Client(server.address, token=team_token) as team:
                assert (await team.step(sid, ticks=2)).time.tick == 2
                own = (await team.create_session(name="mine")).session_id
                assert own in team.owner_tokens
                assert (await team.step(own, ticks=3)).time.tick == 3
                async for message in team.stream_states(own):
                    assert message.state.time.tick == 3
                    break
                async with team.drive(own, await team.spawn_vehicle(own)) as driver:
                    assert (await driver.observe()).time.tick == 3
                with pytest.raises(grpc.aio.AioRpcError) as denied:
                    await team.step(other, ticks=1)
                assert denied.value.code() in (grpc.StatusCode.PERMISSION_DENIED,
                                               grpc.StatusCode.NOT_FOUND)
            with pytest.raises(ValueError):
                pitlane.aio.Client(server.address, token="plt_bad token")

        run(main())


def test_a_revoked_owner_token_falls_back_for_every_call_in_flight():
    """Two calls made with the owner token at once, both refused as revoked: each is made
    again with the client's own token (the second no longer finds the owner token)."""
    from pitlane.client import _BearerToken  # pylint: disable=import-outside-toplevel
    owner_tokens = {"s-x": ("plt_owner", "t1")}
    policy = _BearerToken("plt_own", owner_tokens)
    policy._owner_first.add("s-x")  # pylint: disable=protected-access
    first, second = policy.first("s-x"), policy.first("s-x")
    assert first == second == ("plt_owner", True)
    for used in (first, second):
        assert policy.after("s-x", used[1], grpc.StatusCode.UNAUTHENTICATED) == ("plt_own", False)
    assert "s-x" not in owner_tokens and policy.first("s-x") == ("plt_own", False)
