"""neardup inside other frameworks' pipelines, one module each, imported by name only
(``import neardup`` never imports them, nor the framework they need):

    neardup.integrations.datatrove   steps of a datatrove pipeline (the ``datatrove`` extra)
"""
