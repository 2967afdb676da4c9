"""The parallel example sentences every prompt format shows, aligned by position across
the languages; kept apart as data, written for this project (none come from FLORES or
ACL 60/60) (``app.translation.prompts``).
"""

from __future__ import annotations

# Parallel example sentences, one list per language, aligned by position. The first three
# are whole sentences; the last two are fragments, as a live speaker's partial transcript
# is: a prompt with only whole sentences teaches a small model nothing about a fragment,
# and it tends to copy the English instead (``app.translation.pathology``).
FEW_SHOT_EXAMPLES: dict[str, list[str]] = {
    "en": [
        "The train to the airport leaves every twenty minutes.",
        "We have updated the results table in the second section.",
        "Thank you all for coming to this talk today.",
        "So on the right side you can see",
        "The new system is faster than",
    ],
    "de": [
        "Der Zug zum Flughafen fährt alle zwanzig Minuten.",
        "Wir haben die Ergebnistabelle im zweiten Abschnitt aktualisiert.",
        "Vielen Dank an Sie alle, dass Sie heute zu diesem Vortrag gekommen sind.",
        "Auf der rechten Seite sehen Sie also",
        "Das neue System ist schneller als",
    ],
    "fr": [
        "Le train pour l'aéroport part toutes les vingt minutes.",
        "Nous avons mis à jour le tableau des résultats dans la deuxième section.",
        "Merci à tous d'être venus à cette présentation aujourd'hui.",
        "Donc, sur le côté droit, vous pouvez voir",
        "Le nouveau système est plus rapide que",
    ],
    "es": [
        "El tren al aeropuerto sale cada veinte minutos.",
        "Hemos actualizado la tabla de resultados en la segunda sección.",
        "Gracias a todos por venir hoy a esta charla.",
        "Así que en el lado derecho pueden ver",
        "El nuevo sistema es más rápido que",
    ],
    "it": [
        "Il treno per l'aeroporto parte ogni venti minuti.",
        "Abbiamo aggiornato la tabella dei risultati nella seconda sezione.",
        "Grazie a tutti per essere venuti oggi a questo intervento.",
        "Quindi sul lato destro potete vedere",
        "Il nuovo sistema è più veloce di",
    ],
    "pt": [
        "O comboio para o aeroporto parte a cada vinte minutos.",
        "Atualizámos a tabela de resultados na segunda secção.",
        "Obrigado a todos por virem hoje a esta palestra.",
        "Então, do lado direito, podem ver",
        "O novo sistema é mais rápido do que",
    ],
    "uk": [
        "Потяг до аеропорту відправляється кожні двадцять хвилин.",
        "Ми оновили таблицю результатів у другому розділі.",
        "Дякую всім, що прийшли сьогодні на цю доповідь.",
        "Отже, праворуч ви можете побачити",
        "Нова система швидша, ніж",
    ],
    "ru": [
        "Поезд в аэропорт отправляется каждые двадцать минут.",
        "Мы обновили таблицу результатов во втором разделе.",
        "Спасибо всем, что пришли сегодня на этот доклад.",
        "Итак, справа вы можете увидеть",
        "Новая система быстрее, чем",
    ],
    "zh": [
        "去机场的火车每二十分钟一班。",
        "我们更新了第二部分的结果表。",
        "感谢大家今天来听这个报告。",
        "所以在右边你们可以看到",
        "新系统比",
    ],
    "ja": [
        "空港行きの電車は二十分ごとに出発します。",
        "第二節の結果の表を更新しました。",
        "本日はこの講演にお越しいただき、皆さんありがとうございます。",
        "それで、右側に見えるのは",
        "新しいシステムは",
    ],
}
