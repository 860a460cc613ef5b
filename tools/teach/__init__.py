"""A teacher's kit over nbgrader: a student release without solutions, and grading.

`python -m tools.teach release` builds nbgrader's course folder from notebooks/ and
generates the student release; `python -m tools.teach grade DIR` autogrades a folder of
submissions and writes the gradebook. TEACHING.md says how a teacher uses both.
"""
