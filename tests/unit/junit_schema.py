"""A small checker of XML documents against the subset of XML Schema that
``tests/unit/junit-10.xsd`` uses (standard library only).

Understood: global ``xs:element`` declarations (by ``name``; children by ``ref``), an
inline ``xs:complexType`` (``mixed="true"`` or not) with one ``xs:sequence`` of element
references with ``minOccurs``/``maxOccurs``, ``xs:attribute`` with ``use`` and ``type``
(``xs:string`` or a named ``xs:simpleType`` restricted by an ``xs:pattern``), and elements
of ``type="xs:string"`` (text only). Anything else in the schema is an error of the
checker, so it cannot pass a document by ignoring a rule it does not know.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from xml.etree import ElementTree as ET

XS = "{http://www.w3.org/2001/XMLSchema}"


@dataclass
class _Decl:
    name: str
    text_only: bool = False        # type="xs:string": no attributes, no children
    mixed: bool = False            # text allowed beside children
    children: list[tuple[str, int, float]] = field(default_factory=list)  # ref, min, max
    attributes: dict[str, tuple[bool, str]] = field(default_factory=dict)  # required, type


class Schema:
    def __init__(self, path) -> None:
        root = ET.parse(path).getroot()
        self.patterns: dict[str, re.Pattern] = {}
        self.elements: dict[str, _Decl] = {}
        for node in root:
            if node.tag == XS + "simpleType":
                (restriction,) = node
                (pattern,) = restriction
                assert restriction.get("base") == "xs:string" and pattern.tag == XS + "pattern"
                self.patterns[node.get("name")] = re.compile(pattern.get("value"))
            elif node.tag == XS + "element":
                self.elements[node.get("name")] = self._element(node)
            elif not isinstance(node.tag, str):     # a comment
                continue
            else:
                raise ValueError(f"junit_schema: unsupported schema part {node.tag}")

    def _element(self, node) -> _Decl:
        decl = _Decl(node.get("name"))
        if node.get("type") == "xs:string":
            decl.text_only = True
            return decl
        (ctype,) = [c for c in node if isinstance(c.tag, str)]
        assert ctype.tag == XS + "complexType", ctype.tag
        decl.mixed = ctype.get("mixed") == "true"
        for part in ctype:
            if part.tag == XS + "sequence":
                for child in part:
                    assert child.tag == XS + "element" and child.get("ref"), child.attrib
                    high = child.get("maxOccurs", "1")
                    decl.children.append((child.get("ref"), int(child.get("minOccurs", "1")),
                                          float("inf") if high == "unbounded" else int(high)))
            elif part.tag == XS + "attribute":
                decl.attributes[part.get("name")] = (part.get("use") == "required",
                                                     part.get("type"))
            else:
                raise ValueError(f"junit_schema: unsupported complexType part {part.tag}")
        return decl

    def errors(self, document: str) -> list[str]:
        """Every way ``document`` breaks the schema (empty: valid)."""
        root = ET.fromstring(document)
        problems: list[str] = []
        if root.tag not in self.elements:
            return [f"root element <{root.tag}> is not declared"]
        self._check(root, root.tag, problems)
        return problems

    def _check(self, node, path: str, problems: list[str]) -> None:
        decl = self.elements.get(node.tag)
        if decl is None:
            problems.append(f"{path}: element not declared")
            return
        for name, value in node.attrib.items():
            if name not in decl.attributes:
                problems.append(f"{path}: attribute {name!r} not allowed")
                continue
            kind = decl.attributes[name][1]
            if kind in self.patterns and not self.patterns[kind].fullmatch(value):
                problems.append(f"{path}: attribute {name}={value!r} is not a {kind}")
        for name, (required, _) in decl.attributes.items():
            if required and name not in node.attrib:
                problems.append(f"{path}: required attribute {name!r} missing")
        children = list(node)
        if decl.text_only:
            if children:
                problems.append(f"{path}: text only, has child elements")
            return
        text = (node.text or "") + "".join(c.tail or "" for c in children)
        if text.strip() and not decl.mixed:
            problems.append(f"{path}: text not allowed")
        # the sequence: each declared child in order, within its bounds
        i = 0
        for ref, low, high in decl.children:
            count = 0
            while i < len(children) and children[i].tag == ref and count < high:
                self._check(children[i], f"{path}/{ref}[{count}]", problems)
                i += 1
                count += 1
            if count < low:
                problems.append(f"{path}: needs at least {low} <{ref}>, has {count}")
        for extra in children[i:]:
            problems.append(f"{path}: <{extra.tag}> not allowed here (order or count)")
