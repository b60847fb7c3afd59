"""UTF-8 safe streaming and stop strings that span token boundaries."""
from desktop_app.engine.text import TextStream


def test_multibyte_characters_split_across_tokens():
    data = "héllo 😀 world".encode()
    stream = TextStream()
    pieces = [stream.push(data[i:i + 1]) for i in range(len(data))]
    assert "".join(pieces) + stream.finish() == "héllo 😀 world"
    assert all("\ufffd" not in p for p in pieces)


def test_a_character_cut_in_two_by_the_end_is_left_out():
    # the token limit between an emoji's tokens: the reply ended in "�" (a new user's try)
    stream = TextStream()
    assert stream.push("fish ".encode() + "🐟".encode()[:2]) == "fish "
    assert stream.finish() == "" and stream.text == "fish "
    # bytes that are not UTF-8 at all, mid-text, are still shown as what they are
    stream = TextStream()
    assert stream.push(b"a\xff b") + stream.finish() == "a\ufffd b"


def test_stop_string_across_tokens_cuts_the_text_before_it():
    stream = TextStream(["</end>"])
    out = [stream.push(p) for p in [b"Hello ", b"wor", b"ld </e", b"nd> more"]]
    assert stream.stopped and stream.text == "Hello world "
    assert "".join(out) == "Hello world "


def test_possible_stop_prefix_is_held_back_then_released():
    stream = TextStream(["STOP"])
    assert stream.push(b"abc ST") == "abc "
    assert stream.push(b"ART") == "START"
    assert not stream.stopped
    assert stream.push(b" ST") == " "
    assert stream.finish() == "ST"


def test_earliest_of_several_stop_strings_wins():
    stream = TextStream(["bb", "a"])
    stream.push(b"xxbbya")
    assert stream.text == "xx"


def test_a_primed_stream_goes_on_from_the_text_before_it():
    """Continue: the reply's last tokens are read first, as text already shown. A character they end in
    the middle of comes whole, and a stop string that began in them ends the reply."""
    s = TextStream()
    s.prime([b"Hi \xe3", b"\x81"])                  # (お is e3 81 8a: its last byte is the next token's)
    assert s.push(b"\x8a!") == "お!" and s.text == "お!"
    s = TextStream(["\n\nUser:"])
    s.prime([b"Done.\n\nUs"])
    assert s.push(b"er: hi") == "" and s.stopped and s.text == ""
    assert s.finish() == ""
