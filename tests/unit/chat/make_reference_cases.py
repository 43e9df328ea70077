#!/usr/bin/env python3
"""Regenerates the reference cases of the chat-template tests from the real Jinja2 (3.1), configured as
Hugging Face's apply_chat_template configures it (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols, tojson = json.dumps(ensure_ascii=False), raise_exception).

  python3 tests/unit/chat/make_reference_cases.py

writes, next to this script:
  jinja_cases.jsonl  {"template", "vars", "rendered"} or {..., "error_type", "error"}: interpreter semantics
  model_cases.jsonl  {"family", "messages", "tools", "add_generation_prompt", "extra", "rendered"|"error"...}:
                     more conversations through the real Qwen3 / Llama 3 templates
Needs jinja2 and the tokenizer configs in .cache/tokenizers (setup.sh).
"""
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
ENV.filters["tojson"] = tojson
ENV.globals["raise_exception"] = raise_exception


def render(source, variables):
    try:
        return {"rendered": ENV.from_string(source).render(**variables)}
    except Exception as e:  # the error a renderer must reproduce
        return {"error_type": type(e).__name__, "error": str(e)}


# Interpreter semantics: (template, variables). Variables default to the apply_chat_template ones.
SNIPPETS = [
    # whitespace control
    ("a\n  {% if true %}\n  X\n  {% endif %}\nb\n", {}),
    ("{{ 'a' }}  {% if true %}X{% endif %}", {}),
    ("{{ 'a' }}\n  {% if true %}X{% endif %}", {}),
    ("x {#- c -#}  y", {}),
    ("a\n  {# c #}\nb", {}),
    ("a\n  {%+ if true %}\nb{% endif %}", {}),
    ("a\n{% if true +%}\nb{% endif %}", {}),
    ("a  {%- if true -%}  b  {%- endif -%}  c", {}),
    ("a\n\n{{- 'x' -}}\n\nb", {}),
    ("line\r\nnext\r\n", {}),
    ("\t  {% for i in [1, 2] %}\n\t{{ i }}\n  {% endfor %}\n", {}),
    ("{% if true %}yes{% else %}no{% endif %}\n", {}),
    # literals and printing
    ("{{ [1, 'a', none, true, 1.5, {'k': [2]}] }}", {}),
    ("{{ (1, 2) }}{{ (1,) }}{{ () }}{{ 1, 2 }}", {}),
    ("{{ \"it's\" }}{{ ['it\\'s', 'q\"'] }}{{ ['both\\'\"'] }}", {}),
    ("{{ 'a\\x41\\u00e9\\n' }}|{{ \"\\d\" }}|{{ 'a' 'b' }}", {}),
    ("{{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1.5 }} {{ 2.0 }} {{ 1_000 }} {{ 1E3 }}", {}),
    ("{{ 0.1 + 0.2 }} {{ 1/3 }} {{ 2**0.5 }} {{ 1e300 * 1e10 }} {{ -0.0 }}", {}),
    ("{{ x }}|{{ none }}|{{ true }}|{{ False }}|{{ 12 }}", {}),
    ("{{ ['\\n', '\\t', '\\x01', '\\u00a0', 'é', '\\u2028'] }}", {}),
    ("{{ d }}", {"d": {"b": 1, "a": [True, None, 2.5, "x"]}}),
    # arithmetic
    ("{{ 2**3**2 }} {{ -2**2 }} {{ 7 // -2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 6/2 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}", {}),
    ("{{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ 10 - 2 - 3 }} {{ 2 * 3 % 4 }} {{ true + 1 }}", {}),
    ("{{ 'ab' * 3 }}{{ 2 * 'cd' }}{{ [1] * 2 }}{{ [1, 2] + [3] }}{{ 'x' ~ 1 ~ none ~ u ~ 2.0 }}", {}),
    ("{{ '%s-%d' % ('a', 3) }}|{{ '%s' % 'x' }}|{{ '%.2f' % 3.14159 }}|{{ '100%%' % () }}", {}),
    ("{{ 'a' + 1 }}", {}),
    ("{{ 1 + 'a' }}", {}),
    ("{{ [1] + 'a' }}", {}),
    ("{{ 'a' - 'b' }}", {}),
    ("{{ 1 / 0 }}", {}),
    ("{{ 1 // 0 }}", {}),
    ("{{ 'a' * 'b' }}", {}),
    ("{{ -'a' }}", {}),
    # comparisons, logic
    ("{{ 1 == 1.0 }} {{ 1 == true }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }}", {}),
    ("{{ 1 != 2 }} {{ none == none }} {{ u == u }} {{ u == none }} {{ 2 >= 2.0 }} {{ 'b' <= 'a' }}", {}),
    ("{{ 'a' in 'cat' }} {{ 'z' not in 'cat' }} {{ 1 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'a' in u }}", {}),
    ("{{ 1 < 'a' }}", {}),
    ("{{ 1 in 5 }}", {}),
    ("{{ 1 in 'abc' }}", {}),
    ("{{ 'a' in none }}", {}),
    ("{{ 0 or 'x' }} {{ 1 and 'y' }} {{ '' and 'z' }} {{ none or none }} {{ not [] }} {{ not 'a' }}", {}),
    ("{{ 'x' if true else 'y' }}{{ 'x' if false else 'y' }}|{{ 'x' if false }}|{{ 'a' if false else 'b' if true }}", {}),
    # undefined semantics
    ("[{{ u }}][{{ u is defined }}][{{ u is undefined }}][{{ u|length }}][{% for x in u %}x{% endfor %}][{{ u|default('d') }}]", {}),
    ("{{ u.a }}", {}),
    ("{{ u['a'] }}", {}),
    ("{{ u() }}", {}),
    ("{{ u + 'a' }}", {}),
    ("{{ d.missing }}|{{ d['missing'] }}|{{ l[5] }}|{{ d.a.b }}|{{ 'abc'[10] }}", {"d": {"a": 1}, "l": [1]}),
    ("{{ d.missing.x }}", {"d": {"a": 1}}),
    ("{{ l[5].b }}", {"l": [1]}),
    ("{{ n.startswith('a') }}", {"n": None}),
    ("{{ l.startswith('a') }}", {"l": [1]}),
    ("{% for x in none %}{% endfor %}", {}),
    ("{% for x in 5 %}{% endfor %}", {}),
    ("{{ none|length }}", {}),
    # access
    ("{{ d.a }}{{ d['a'] }}{{ l[0] }}{{ l[-1] }}{{ l.0 }}{{ 'héllo'[1] }}{{ 'héllo'[-1] }}", {"d": {"a": 1}, "l": [1, 2]}),
    ("{{ 'abcdef'[::-1] }} {{ 'abcdef'[1:] }} {{ 'abcdef'[:-2] }} {{ 'abcdef'[::2] }} {{ 'abcdef'[4:1:-1] }} {{ [1,2,3][1:] }} {{ [1,2,3][::-1] }} {{ 'héllo'[1:3] }}", {}),
    ("{{ [1,2,3][-10:10] }}{{ [1,2,3][5:] }}{{ 'abc'[-1:] }}{{ (1,2,3)[1:] }}", {}),
    ("{{ d['items'] is defined }} {{ d.items is callable }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }}", {"d": {"a": 1, "b": 2}}),
    ("{{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 5) }}", {"d": {"a": 1}}),
    ("{{ l.append(1) }}", {"l": [1]}),
    # string methods
    ("{{ s.startswith('He') }} {{ s.endswith('!') }} {{ s.startswith(('x', 'H')) }} {{ s.upper() }} {{ s.lower() }} {{ s.title() }} {{ s.capitalize() }}", {"s": "Hello wORLD!"}),
    ("{{ s.split() }} {{ s.split(',') }} {{ s.split(',', 1) }} {{ s.rsplit(',', 1) }} {{ s.split(None, 1) }} {{ s.rsplit(None, 1) }}", {"s": "  a,b , c  "}),
    ("[{{ s.strip() }}] [{{ s.lstrip() }}] [{{ s.rstrip() }}] [{{ s.strip(' \\n') }}] [{{ s.strip('\\n') }}]", {"s": "\n  pad \u3000\n"}),
    ("{{ s.replace('a', 'b') }} {{ s.replace('a', 'b', 1) }} {{ s.replace('', '-') }} {{ s.find('n') }} {{ s.rfind('n') }} {{ s.count('a') }} {{ s.find('zz') }}", {"s": "banana"}),
    ("{{ ', '.join(['a', 'b']) }} {{ ''.join('xyz') }} {{ 'a{}b{}'.format(1, 'c') }} {{ '{0}{0}'.format('r') }} {{ '{x}-{y}'.format(x=1, y=2) }} {{ '{{}}'.format() }}", {}),
    ("{{ s.splitlines() }} {{ 'ab'.isalpha() }} {{ '12'.isdigit() }} {{ ' '.isspace() }} {{ 'ab'.islower() }} {{ 'AB'.isupper() }}", {"s": "a\nb\r\nc"}),
    ("{{ ','.join([1, 2]) }}", {}),
    ("{{ '</think>' in s }} {{ s.split('</think>')[-1].lstrip('\\n') }} {{ s.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}", {"s": "<think>\nreason\n</think>\n\nanswer"}),
    # filters
    ("{{ [1,2]|join }}|{{ [1,2]|join(', ') }}|{{ [{'a': 'x'}, {'a': 'y'}]|join(',', attribute='a') }}|{{ []|first }}|{{ u|first }}|{{ 'abc'|first }}|{{ 'abc'|last }}|{{ [1,2]|last }}", {}),
    ("{{ '3.7'|int }}|{{ '0x1A'|int }}|{{ true|int }}|{{ 'abc'|float }}|{{ none|string }}|{{ 3.9|int }}|{{ '12'|int + 1 }}|{{ 'x'|int(7) }}|{{ '1.5'|float }}", {}),
    ("{{ 2.5|round }} {{ 3.5|round }} {{ 2|round }} {{ 2.567|round(2) }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(0, 'floor') }}", {}),
    ("{{ 'a\nb\n'|indent(2) }}|{{ 'a\n\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent(2, blank=true) }}|{{ 'a\nb'|indent('> ') }}", {}),
    ("{{ d|items|list }} {{ u|items|list }} {{ d|dictsort }} {{ d|dictsort(reverse=true) }} {{ d|dictsort(by='value') }}", {"d": {"b": 1, "a": 2}}),
    ("{{ ['b', 'A', 'a']|sort }} {{ ['b', 'A', 'a']|sort(case_sensitive=true) }} {{ ['b', 'A', 'a']|unique|list }} {{ [3, 1]|max }} {{ [3, 1]|min }} {{ []|max }} {{ [3,1,2]|sort(reverse=true) }}", {}),
    ("{{ [{'n': 2}, {'n': 1}]|sort(attribute='n') }} {{ [{'n': 2}, {'n': 1}]|map(attribute='n')|list }} {{ [{'a': {'b': 1}}]|map(attribute='a.b')|list }} {{ [1, 2]|map('string')|list }}", {}),
    ("{{ [1, none, 0, 2]|select|list }} {{ [1, none]|reject|list }} {{ [1, 2, 3]|select('odd')|list }} {{ [1, 2, 3]|reject('odd')|list }} {{ [1, 5, 3]|select('gt', 2)|list }}", {}),
    ("{{ tools|selectattr('type', 'equalto', 'function')|map(attribute='function.name')|list }} {{ tools|rejectattr('type', 'eq', 'function')|list }} {{ tools|selectattr('strict')|list }} {{ tools|selectattr('strict', 'defined')|list|length }}",
     {"tools": [{"type": "function", "function": {"name": "f"}}, {"type": "x", "strict": True}]}),
    ("{{ [1, 2]|sum }} {{ [{'v': 1}, {'v': 2}]|sum(attribute='v') }} {{ [1, 2]|length }} {{ 'héllo'|length }} {{ {'a': 1}|count }} {{ 'abc'|list }} {{ 'abc'|reverse }} {{ [1, 2]|reverse|list }}", {}),
    ("{{ 'a b'|upper }}{{ 'A'|lower }}{{ 'ab'|replace('a', 'x') }}{{ 'hello world'|title }}{{ 'hELLO'|capitalize }}{{ '  t  '|trim }}{{ 'xxtxx'|trim('x') }}{{ 1|string }}{{ [1, 'a']|string }}", {}),
    ("{{ '<a & \"b\">'|e }}{{ '<a>'|escape }}{{ 'x'|safe }}{{ u|default('d') }}{{ none|default('d') }}{{ none|default('d', true) }}{{ ''|d('e', true) }}{{ 'abc'|center(9) }}|{{ 'a b  c'|wordcount }}", {}),
    ("{{ d|tojson }} {{ 'é\"\\n\\u0001'|tojson }} {{ 1.0|tojson }} {{ [1, [2, {}], []]|tojson(indent=2) }} {{ d|tojson(indent='--', sort_keys=true) }} {{ [1, 2]|tojson(separators=(',', ':')) }} {{ 'é'|tojson(ensure_ascii=true) }} {{ '\U0001F600'|tojson(ensure_ascii=true) }}",
     {"d": {"z": None, "a": [True, 1.5, "é"]}}),
    ("{{ u|tojson }}", {}),
    ("{{ (1, 2)|tojson }} {{ d.items()|list|tojson }} {{ 1e20|tojson }} {{ 12|tojson }} {{ -3|abs }} {{ -1.5|abs }}", {"d": {"a": 1}}),
    ("{{ '%s and %s'|format('a', 'b') }} {{ 'x'|attr('upper') is callable }} {{ d|attr('a') }}", {"d": {"a": 1}}),
    # tests
    ("{{ u is iterable }} {{ {} is sequence }} {{ true is number }} {{ true is integer }} {{ 1.0 is float }} {{ 's' is string }} {{ {} is mapping }} {{ [] is mapping }} {{ none is none }} {{ 0 is none }}", {}),
    ("{{ x is divisibleby 3 }} {{ x is divisibleby(4) }} {{ x is odd }} {{ x is even }} {{ x is eq 9 }} {{ x is gt(3) }} {{ x is in [9] }} {{ x is not in [9] }} {{ 'a' is lower }} {{ 'A' is upper }}", {"x": 9}),
    ("{{ false is false }} {{ 0 is false }} {{ true is true }} {{ 1 is true }} {{ true is boolean }} {{ 1 is sameas 1 }} {{ none is sameas none }} {{ u is not defined }} {{ range is callable }} {{ 'upper' is filter }} {{ 'odd' is test }}", {}),
    # statements
    ("{% for a, b in [[1, 2], [3, 4]] %}{{ a }}{{ b }};{% endfor %}{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {"d": {"x": 1, "y": 2}}),
    ("{% for a in [1, 2, 3, 4] if a > 1 %}{{ loop.index }}{{ a }}{{ loop.length }}{% endfor %}", {}),
    ("{% for a in [] %}x{% else %}empty{% endfor %}{% for a in [1] %}x{% else %}empty{% endfor %}", {}),
    ("{% for a in 'xyz' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.cycle('o', 'e') }}{{ loop.previtem is defined }}{{ loop.nextitem|default('-') }};{% endfor %}", {}),
    ("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
    ("{% for i in [1, 2] %}{% for j in [3, 4] %}{{ loop.index }}{{ i }}{{ j }}{% if j == 3 %}{% break %}{% endif %}{% endfor %}{{ loop.index }}|{% endfor %}", {}),
    ("{% set x = 5 %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}|{{ x }}", {}),
    ("{% for i in [1, 2] %}{% if i == 2 %}{{ y }}{% endif %}{% set y = i %}{% endfor %}|{{ y }}", {}),
    ("{% set ns = namespace(n=0, items=[]) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% set ns.items = ns.items + [i] %}{% endfor %}{{ ns.n }}{{ ns.items }}{{ ns.missing }}", {}),
    ("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set (c, d) = [3, 4] %}{{ c }}{{ d }}{% set t = 1, 2 %}{{ t }}", {}),
    ("{% set a, b = [1] %}", {}),
    ("{% set x %}inner {{ 1 + 1 }}{% endset %}[{{ x }}]", {}),
    ("{% if x %}{% set y = 1 %}{% endif %}{{ y }}", {"x": True}),
    ("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(name='C') }} {{ greet() }}", {}),
    ("{% macro render(m) %}{{ m.role }}: {{ m.content }}{% endmacro %}{% for m in messages %}{{ render(m) }}\n{% endfor %}", {"messages": [{"role": "user", "content": "x"}]}),
    ("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}", {}),
    ("{% filter upper %}shout {{ 'this' }}{% endfilter %}", {}),
    ("{% if a %}A{% elif b %}B{% elif c %}C{% else %}D{% endif %}", {"b": 0, "c": "y"}),
    ("{{ range(3)|list }}{{ range(1, 10, 3)|list }}{{ range(5, 0, -2)|list }}{{ range(5)[1] }}{{ dict(a=1, b='x') }}{{ namespace(a=1).a }}", {}),
    ("{{ raise_exception('Only user and assistant roles are supported!') }}", {}),
    ("{% if messages[0]['role'] != 'user' %}{{ raise_exception('Conversation roles must alternate') }}{% endif %}ok", {"messages": [{"role": "system"}]}),
    # found by differential fuzzing against Jinja2
    ("{{ 'a-b c_d é9'|wordcount }} {{ '\\é'|length }}{{ '\\é' }} {{ u is callable }} {{ '1\x00'|int(7) }} {{ ' 2 '|int }} {{ '1e3'|int }} {{ 'x'|float(1.5) }}", {}),
    ("{{ range(100001)|length }}", {}),
    ("{{ u|int }}", {}),
    ("{% set a, = [1] %}", {}),
    ("{% for a, in [[1], [2]] %}{{ a }}{% endfor %}{{ []|map(x)|list }}", {}),
    ("{{ 007 }}", {}),
    # HF chat variables
    ("{{ bos_token }}{% for m in messages %}{{ m['role'] }}:{{ m['content']|trim }}{% if not loop.last %}\n{% endif %}{% endfor %}{% if add_generation_prompt %}>{% endif %}",
     {"bos_token": "<s>", "messages": [{"role": "user", "content": " a "}, {"role": "assistant", "content": "b"}], "add_generation_prompt": True}),
    ("{% if tools is not none %}{{ tools|length }}{% endif %}|{{ tools is defined }}|{{ documents is none }}", {}),
    ("{{ messages|tojson }}", {"messages": [{"role": "user", "content": "\u4f60\u597d \"q\" \\ \u00e9"}]}),
]

# Conversations through the real templates: (messages, tools, add_generation_prompt, extra variables).
WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Get the weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "Ville / 城市"}},
                               "required": ["city"]}}}
TIME_TOOL = {"type": "function", "function": {"name": "get_time", "description": "Current time", "parameters": {"type": "object", "properties": {}}}}
CONVERSATIONS = [
    ([{"role": "user", "content": "Hi"}], None, False, {}),
    ([{"role": "system", "content": "Sys."}, {"role": "user", "content": "Hi"}], None, True, {"enable_thinking": True}),
    ([{"role": "user", "content": "Hi"}], None, True, {"enable_thinking": False}),
    ([{"role": "system", "content": "Sys."}, {"role": "user", "content": "Hi"}, {"role": "system", "content": "Late system"}], None, True, {}),
    ([{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1", "reasoning_content": "R1"},
      {"role": "user", "content": "Q2"}, {"role": "assistant", "content": "A2", "reasoning_content": "R2"}], None, False, {}),
    ([{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "<think>\nr1\n</think>\n\nA1"},
      {"role": "user", "content": "Q2"}, {"role": "assistant", "content": "<think>r2</think>A2"}], None, True, {}),
    ([{"role": "user", "content": "Q"}, {"role": "assistant", "content": "\n\nplain answer", "reasoning_content": None}], None, False, {}),
    ([{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A", "reasoning_content": ""}], None, False, {}),
    ([{"role": "user", "content": "Weather and time in Paris?"},
      {"role": "assistant", "content": "Let me check.", "reasoning_content": "Two tools needed.",
       "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                      {"type": "function", "function": {"name": "get_time", "arguments": "{\"tz\": \"Europe/Paris\"}"}}]},
      {"role": "tool", "content": "{\"temp_c\": 12}"}, {"role": "tool", "content": "12:00"},
      {"role": "assistant", "content": "It is 12°C at noon."}], [WEATHER_TOOL, TIME_TOOL], True, {}),
    ([{"role": "user", "content": "Call it"},
      {"role": "assistant", "content": "", "tool_calls": [{"name": "get_time", "arguments": {}}]},
      {"role": "tool", "content": "<tool_response>x</tool_response>"}], [TIME_TOOL], True, {"enable_thinking": False}),
    ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "<tool_response>fake</tool_response>"}], [WEATHER_TOOL], True, {}),
    ([{"role": "user", "content": "日本語のテキスト ✓ 😀"}, {"role": "assistant", "content": "Ответ"}], None, True, {}),
    ([{"role": "user", "content": "tabs\tand\nnewlines\r\n and \"quotes\" \\ back"}], [{"type": "function", "function": {"name": "q", "description": "quote \" and \\ and 😀", "parameters": {"n": 1.5, "big": 10000000000000000000000.0, "z": None, "b": False}}}], True, {}),
    ([{"role": "user", "content": None}], None, True, {}),
    ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}], None, True, {}),
    ([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], None, True, {}),
    ([{"role": "user"}], None, True, {}),
    ([], None, True, {}),
]


def main():
    with open(os.path.join(HERE, "jinja_cases.jsonl"), "w", encoding="utf-8") as out:
        for source, variables in SNIPPETS:
            full = {"messages": [], "tools": None, "documents": None, "add_generation_prompt": False}
            full.update(variables)
            case = {"template": source, "vars": variables}
            case.update(render(source, full))
            out.write(json.dumps(case, ensure_ascii=False) + "\n")
    with open(os.path.join(HERE, "model_cases.jsonl"), "w", encoding="utf-8") as out:
        for family in ("qwen3", "llama3"):
            config_path = os.path.join(ROOT, ".cache", "tokenizers", family, "tokenizer_config.json")
            with open(config_path, encoding="utf-8") as f:
                config = json.load(f)
            special = {k: config[k] for k in ("bos_token", "eos_token", "unk_token", "pad_token") if config.get(k)}
            if "additional_special_tokens" in config:
                special["additional_special_tokens"] = config["additional_special_tokens"]
            for messages, tools, add_generation_prompt, extra in CONVERSATIONS:
                variables = dict(special, messages=messages, tools=tools, documents=None,
                                 add_generation_prompt=add_generation_prompt, **extra)
                case = {"family": family, "messages": messages, "tools": tools,
                        "add_generation_prompt": add_generation_prompt, "extra": extra}
                case.update(render(config["chat_template"], variables))
                out.write(json.dumps(case, ensure_ascii=False) + "\n")
    print("jinja", jinja2.__version__, "->", HERE, file=sys.stderr)


if __name__ == "__main__":
    main()
