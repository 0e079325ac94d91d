from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("league", "0014_player_seed"),
    ]

    operations = [
        migrations.AddField(
            model_name="league",
            name="version",
            field=models.PositiveBigIntegerField(default=0, editable=False),
        ),
    ]
