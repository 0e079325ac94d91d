from django.apps import AppConfig


class RefereeConfig(AppConfig):
    name = "referee"
