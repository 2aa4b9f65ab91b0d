import pytest

from astra_foundation.llm import ExtractError, extract_code, extract_json, strip_reasoning


def test_think_blocks_are_dropped():
    assert strip_reasoning('<think>plan {"a": 1}</think>\n{"b": 2}') == '{"b": 2}'
    # only the closing tag: the template opened the block in the prompt
    assert strip_reasoning('reasoning {"x": 0}</think>{"b": 2}') == '{"b": 2}'
    # ran out of tokens while thinking
    assert strip_reasoning('{"b": 2}<think>and then') == '{"b": 2}'


@pytest.mark.parametrize(
    "text, value",
    [
        ('{"a": 1}', {"a": 1}),
        ('Sure! Here it is:\n```json\n{"a": [1, 2]}\n```\nAnything else?', {"a": [1, 2]}),
        ('<think>{"wrong": true}</think>```\n{"a": 1}\n```', {"a": 1}),
        ('The answer is {"a": "x}y"} as requested.', {"a": "x}y"}),
        ('noise { not json } then {"a": 2}', {"a": 2}),
    ],
)
def test_json_found(text, value):
    assert extract_json(text) == value


@pytest.mark.parametrize(
    "text, kind",
    [
        ("", "empty"),
        ("<think>only thoughts</think>", "empty"),
        ("I'm sorry, but I can't help with that.", "no_json"),
        ('```json\n{"a": 1, "b": [1, 2\n```', "truncated"),
        ('{"a": 1, "b": ', "truncated"),
        ("[1, 2, 3]", "wrong_type"),
    ],
)
def test_json_errors_have_kinds(text, kind):
    with pytest.raises(ExtractError) as e:
        extract_json(text)
    assert e.value.kind == kind
    assert str(e.value)  # a message the repair round can show


def test_list_expected():
    assert extract_json("```json\n[1, 2]\n```", expect=list) == [1, 2]


def test_code_extraction():
    text = "Here:\n```python\ndef f(x):\n    return x\n```\nDone."
    assert extract_code(text) == "def f(x):\n    return x\n"
    assert extract_code("def g():\n    return 1") == "def g():\n    return 1\n"
    with pytest.raises(ExtractError) as e:
        extract_code("```bash\nrm -rf /\n```")
    assert e.value.kind == "no_code"
